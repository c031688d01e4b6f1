package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// The liar corpus (issue 40 item 6): every way a hostile probe binary has
// been seen to fake a pass, against the weak reference and an io_uring-
// permissive hardened target, in exec and task launch, in the docker,
// bwrap and wrapper runners. None may exit 0: each must get a failing
// verdict (exit 1; a harness error, exit 2, proves nothing). It grows
// with each attack; `make soak` runs it ten times.
var liarModes = []string{
	"selfseccomp",          // its own filter, seccomp(SECCOMP_SET_MODE_FILTER)
	"selfseccomp-listener", // ... with SECCOMP_FILTER_FLAG_NEW_LISTENER: the call returns a descriptor
	"selfseccomp-tsync",    // ... with SECCOMP_FILTER_FLAG_TSYNC
	"selfseccomp-prctl",    // ... through prctl(PR_SET_SECCOMP)
	"flood-filter",         // 1,100 kinds of loopback connect first, so the filter is only counted
	"early-filter",         // the filter at once, before the go-ahead: before a task's watch
	"flipped",              // makes the call and reports the opposite
	"na",                   // "io_uring is not built into this kernel"
	"forgelines-blocked",   // blocked, with a detail that forges terminal lines
}

// corpusTarget is one target of the corpus; ioUring marks the permissive
// hardened ones, where the honest probe must fail on io_uring.
type corpusTarget struct {
	name    string
	ioUring bool
	path    func(t *testing.T) string
}

var corpusTargets = []corpusTarget{
	{"docker-weak-exec", false, func(*testing.T) string { return "fixtures/targets/weak.yaml" }},
	{"docker-weak-task", false, weakInTaskMode},
	{"docker-iouring-exec", true, ioUringTarget},
	{"docker-iouring-task", true, func(t *testing.T) string { return relaunch(t, ioUringTarget(t), "launch: exec", "launch: task") }},
	{"bwrap-weak-exec", false, func(*testing.T) string { return "fixtures/targets/bwrap-weak.yaml" }},
	{"bwrap-weak-task", false, func(t *testing.T) string {
		return inTaskMode(t, "bwrap-weak.yaml", "  launch: exec\n", "  launch: task\n")
	}},
	{"bwrap-iouring-exec", true, func(t *testing.T) string { return relaunch(t, bwrapIOUringTarget(t), "launch: task", "launch: exec") }},
	{"bwrap-iouring-task", true, bwrapIOUringTarget},
	{"wrapper-bwrap-task", true, func(*testing.T) string { return "fixtures/targets/wrapper-bwrap.yaml" }},
}

// TestLiarCorpus runs each liar of the corpus against each target with the
// io_uring probe (the one a box's own filter fakes), and the honest probe
// against the permissive targets, which must fail there too (exit 1, the
// probe escaped).
func TestLiarCorpus(t *testing.T) {
	binDir(t)
	liars := map[string]string{}
	for _, m := range liarModes {
		liars[m] = forgeBinary(t, m)
	}
	for _, tg := range corpusTargets {
		t.Run(tg.name, func(t *testing.T) {
			target := tg.path(t)
			for _, m := range liarModes {
				t.Run(m, func(t *testing.T) {
					r := sandcheck(t, "run", "--target", target, "--quiet", "--probe-binary", liars[m], "--probes", "syscalls.io-uring-setup")
					rec := r.mustRecord(t)
					if r.code != 1 || rec.Verdict == nil || rec.Verdict.Pass {
						t.Fatalf("the %s liar on %s gave exit %d, verdict %+v; want exit 1 and a failing verdict\n%s", m, tg.name, r.code, rec.Verdict, r.stderr)
					}
					hr := criterion(rec, "hardened-runtime")
					if hr.Status == "" || hr.Status == evidence.StatusPass {
						t.Errorf("hardened-runtime is %+v under the %s liar; want it failed or unconfirmed", hr, m)
					}
					if m == "forgelines-blocked" {
						for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
							if strings.TrimSpace(l) == "verdict: PASS" {
								t.Errorf("a forged verdict line reached the output: %q", l)
							}
						}
					}
					if len(hr.Reasons) > 0 {
						t.Logf("%s on %s: exit %d, hardened-runtime %s: %s", m, tg.name, r.code, hr.Status, hr.Reasons[0])
					}
				})
			}
			if !tg.ioUring {
				return
			}
			t.Run("honest", func(t *testing.T) {
				r := sandcheck(t, "run", "--target", target, "--quiet", "--probes", "syscalls.io-uring-setup")
				rec := r.mustRecord(t)
				if r.code != 1 || len(rec.Results) != 1 || rec.Effective(0) != "escaped" {
					t.Fatalf("the honest probe on %s gave exit %d, results %+v; want exit 1 with io_uring escaped\n%s", tg.name, r.code, rec.Results, r.stderr)
				}
			})
		})
	}
}

// TestHardenedReferencesPassTheSyscallProbes: the hardened references'
// syscall probes stay confirmed with the kernel's seccomp state read at
// each task's start (no false failure from the new checks): the docker
// reference passes (exit 0); the bwrap one, whose verdict fails on its own
// account (no known isolation class, host paths mounted), has every
// syscall probe confirmed by the tracer and read clean.
func TestHardenedReferencesPassTheSyscallProbes(t *testing.T) {
	binDir(t)
	for _, target := range []string{"hardened.yaml", "bwrap-hardened.yaml"} {
		t.Run(target, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+target, "--quiet", "--label-filter", "syscalls")
			rec := r.mustRecord(t)
			if target == "hardened.yaml" && (r.code != 0 || rec.Verdict == nil || !rec.Verdict.Pass) {
				t.Fatalf("%s gave exit %d, verdict %+v; want a pass\n%s", target, r.code, rec.Verdict, r.stderr)
			}
			if r.code == 2 {
				t.Fatalf("%s: exit 2 (a harness error)\n%s", target, r.stderr)
			}
			checked, confirmed := 0, 0
			for _, res := range rec.Results {
				for _, it := range res.Evidence {
					switch it.Kind {
					case "kernel-seccomp":
						checked++
					case "tracer-syscall":
						confirmed++
					case "kernel-seccomp-tampered", "kernel-seccomp-unchecked", "tracer-syscall-unconfirmed":
						t.Errorf("%s: %s: %s", res.Probe, it.Kind, it.Summary)
					}
				}
			}
			if checked != len(rec.Results) || confirmed != len(rec.Results) || len(rec.Results) == 0 {
				t.Errorf("%s: %d results, %d with the host's reading of the box's seccomp state, %d confirmed by the tracer; want all", target, len(rec.Results), checked, confirmed)
			}
			t.Logf("%s: exit %d, %d results, %d read clean, %d confirmed by the tracer", target, r.code, len(rec.Results), checked, confirmed)
		})
	}
}

// relaunch writes a copy of the target at path (beside it, so its relative
// files still resolve) with from replaced by to once.
func relaunch(t *testing.T, path, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), from) != 1 {
		t.Fatalf("%s no longer has %q once; update this test", path, from)
	}
	out := strings.TrimSuffix(path, ".yaml") + "-relaunched.yaml"
	if err := os.WriteFile(out, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// bwrapIOUringTarget writes the bwrap hardened reference with a seccomp
// profile that lets io_uring through (task launch, as the reference).
func bwrapIOUringTarget(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../fixtures/targets")
	if err != nil {
		t.Fatal(err)
	}
	var profile map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "seccomp-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &profile); err != nil {
		t.Fatal(err)
	}
	profile["syscalls"] = append(profile["syscalls"].([]any),
		map[string]any{"names": []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, "action": "SCMP_ACT_ALLOW"})
	tmp := t.TempDir()
	pb, _ := json.Marshal(profile)
	if err := os.WriteFile(filepath.Join(tmp, "seccomp-io-uring.json"), pb, 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(filepath.Join(dir, "bwrap-hardened.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(tb)
	if strings.Count(src, "seccomp: seccomp-default.json") != 1 {
		t.Fatal("bwrap-hardened.yaml no longer names seccomp-default.json once; update this test")
	}
	src = strings.Replace(src, "seccomp: seccomp-default.json", "seccomp: seccomp-io-uring.json", 1)
	target := filepath.Join(tmp, "bwrap-hardened-io-uring.yaml")
	if err := os.WriteFile(target, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return target
}
