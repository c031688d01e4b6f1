// Package e2e runs the built sandcheck binary against the reference targets
// on the real Docker engine: the weak reference is the negative control
// (every probe must escape), the hardened references are the positive
// controls (every probe must be blocked, under runc and under gVisor).
//
// The tests need root, a Docker engine with the runc and runsc runtimes, the
// runner image and the binaries from `make build`; `make test` provides all
// of them. They skip with the reason when run elsewhere in -short mode only.
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// binDir holds sandcheck and sandcheck-probe ($SANDCHECK_BIN or ../bin).
func binDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end tests start real sandboxes; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Fatal("end-to-end tests need root (run them through `make test`)")
	}
	d := os.Getenv("SANDCHECK_BIN")
	if d == "" {
		d, _ = filepath.Abs("../bin")
	}
	for _, b := range []string{"sandcheck", "sandcheck-probe"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("%s not built in %s (run `make build`): %v", b, d, err)
		}
	}
	return d
}

type run struct {
	code   int
	stdout string
	stderr string
	out    string
	rec    *evidence.Record
}

// sandcheck runs the CLI and reads run.json when there is one.
func sandcheck(t *testing.T, args ...string) run {
	t.Helper()
	binDir(t)
	return sandcheckIn(t, t.TempDir(), args...)
}

// sandcheckIn is sandcheck with its reports in out.
func sandcheckIn(t *testing.T, out string, args ...string) run {
	t.Helper()
	bin := binDir(t)
	if args[0] == "run" {
		args = append(args, "--out-dir", out)
	}
	cmd := exec.Command(filepath.Join(bin, "sandcheck"), args...)
	cmd.Dir = ".."
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	r := run{stdout: so.String(), stderr: se.String(), out: out}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sandcheck: %v", err)
	}
	t.Logf("sandcheck %s: exit %d in %s", strings.Join(args, " "), r.code, time.Since(start).Round(time.Millisecond))
	if b, err := os.ReadFile(filepath.Join(out, "run.json")); err == nil {
		r.rec = &evidence.Record{}
		if err := json.Unmarshal(b, r.rec); err != nil {
			t.Fatalf("run.json: %v", err)
		}
	}
	if r.rec != nil {
		t.Cleanup(func() { assertNoLeftovers(t, r.rec.RunID) })
	}
	return r
}

// smallSize reports whether the package runs its longest whole-catalog
// tests at the small size ($SANDCHECK_TEST_SIZE=small, as `make test` sets
// it; `make test-full` and a plain go test run them at full size). A test
// that honours it says which size it ran.
func smallSize(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv("SANDCHECK_TEST_SIZE"); v {
	case "small":
		t.Logf("SANDCHECK_TEST_SIZE=small: this test runs at its small size (make test-full runs it whole)")
		return true
	case "", "full":
		return false
	default:
		t.Fatalf("SANDCHECK_TEST_SIZE=%q: want small or full", v)
		return false
	}
}

// TestMain keeps the folder of the shared runs (see sharedRun) for the
// package's whole run.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandcheck-e2e-shared-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	shared.dir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// shared holds the whole-catalog runs of the reference targets that several
// tests read and none changes: each costs one to three minutes of a loaded
// CI machine, so each runs once per test binary, for whichever test asks
// first, with its reports in a folder that lives until TestMain ends.
var shared = struct {
	sync.Mutex
	dir  string
	runs map[string]*referenceRun
}{runs: map[string]*referenceRun{}}

// referenceRun is one shared run. host holds the host snapshots taken
// around it (TestWeakRunLeavesTheHostAsItWas reads them): before, right
// after (at afterAt), then three more 5 s apart.
type referenceRun struct {
	run
	host    []hostState
	afterAt time.Time
}

// sharedRun runs `sandcheck run --target fixtures/targets/TARGET --quiet`
// once per test binary and hands every caller the same result; with
// snapshots it also snapshots the host around the run. A run that failed
// the test asking for it is not kept: the next caller runs it again.
func sharedRun(t *testing.T, target string, snapshots bool) *referenceRun {
	t.Helper()
	binDir(t)
	shared.Lock()
	defer shared.Unlock()
	if r, ok := shared.runs[target]; ok && (!snapshots || r.host != nil) {
		t.Logf("sandcheck run --target fixtures/targets/%s: the package's shared run (exit %d), reports in %s", target, r.code, r.out)
		return r
	}
	out, err := os.MkdirTemp(shared.dir, strings.TrimSuffix(target, ".yaml")+"-")
	if err != nil {
		t.Fatal(err)
	}
	r := &referenceRun{}
	if snapshots {
		r.host = append(r.host, snapshotHost(t))
	}
	r.run = sandcheckIn(t, out, "run", "--target", "fixtures/targets/"+target, "--quiet")
	if snapshots && r.rec != nil {
		r.afterAt = time.Now()
		r.host = append(r.host, snapshotHost(t))
		for range 3 {
			time.Sleep(5 * time.Second)
			r.host = append(r.host, snapshotHost(t))
		}
	}
	if !t.Failed() {
		shared.runs[target] = r
	}
	return r
}

func (r run) mustRecord(t *testing.T) *evidence.Record {
	t.Helper()
	if r.rec == nil {
		t.Fatalf("no run.json (exit %d)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r.rec
}

// assertNoLeftovers fails when the run left a container or network. It looks
// only for the run's own labels, so runs elsewhere on the machine do not count.
func assertNoLeftovers(t *testing.T, runID string) {
	t.Helper()
	for _, q := range [][]string{
		{"ps", "-aq", "--filter", "label=sandcheck.run=" + runID},
		{"network", "ls", "-q", "--filter", "label=sandcheck.run=" + runID},
	} {
		out, err := exec.Command("docker", q...).Output()
		if err != nil {
			t.Errorf("docker %v: %v", q, err)
			continue
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("the run left behind (docker %s): %s", strings.Join(q, " "), s)
		}
	}
}

// everyProbe asserts that each catalog probe has a result that the policy
// grades with the outcome want gives it (host evidence weighed in), and logs
// where the probe itself could not report that outcome.
func everyProbe(t *testing.T, rec *evidence.Record, want func(probes.Spec) probes.Outcome) {
	t.Helper()
	everyControl(t, rec, func(s probes.Spec) (probes.Outcome, bool) { return want(s), true })
}

// everyControl is everyProbe for the reference controls: a probe for which
// want says false has no such control; its spec records why (see
// controls_test.go) and it is only logged.
func everyControl(t *testing.T, rec *evidence.Record, want func(probes.Spec) (probes.Outcome, bool)) {
	t.Helper()
	got := map[string]int{}
	for i, r := range rec.Results {
		got[r.Probe] = i
	}
	for _, s := range probes.Catalog() {
		i, ok := got[s.ID]
		if !ok {
			t.Errorf("%s: no result", s.ID)
			continue
		}
		r := rec.Results[i]
		want, proven := want(s)
		if !s.AppliesTo(rec.Runner) {
			// A probe of another platform's own daemons: not-applicable
			// here, whatever the profile (its controls are that platform's
			// references).
			want, proven = probes.NotApplicable, true
		}
		if !proven {
			t.Logf("%s on %s: no control here (unproven, see its spec); effective outcome %s", s.ID, rec.Target.Name, rec.Effective(i))
			continue
		}
		if eff := rec.Effective(i); eff != want {
			t.Errorf("%s on %s: effective outcome %s, want %s (reported %s: %s; evidence %+v)", s.ID, rec.Target.Name, eff, want, r.Outcome, r.Detail, r.Evidence)
		}
		if r.Outcome != want {
			t.Logf("%s on %s: the probe reported %s; the host's evidence settled it as %s", s.ID, rec.Target.Name, r.Outcome, rec.Effective(i))
		}
	}
	if len(rec.Errors) > 0 {
		t.Errorf("harness errors: %v", rec.Errors)
	}
}

func hostItem(r evidence.Result, source, kind string) (evidence.Item, bool) {
	for _, it := range r.Evidence {
		if it.Source == source && it.Kind == kind {
			return it, true
		}
	}
	return evidence.Item{}, false
}

func TestWeakReferenceEveryProbeEscapes(t *testing.T) {
	r := sharedRun(t, "weak.yaml", true)
	rec := r.mustRecord(t)
	if r.code != 1 {
		t.Errorf("exit code %d, want 1 (criteria fail)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The negative control: every attempt gets through, and every workload
	// a profile needs works too.
	// Informational probes (fingerprint) attempt nothing: not-applicable.
	everyControl(t, rec, negativeWant)
	if rec.Verdict == nil || rec.Verdict.Pass {
		t.Fatalf("verdict %+v: the weak reference must fail", rec.Verdict)
	}
	// A criterion fails here when it has attempts the profile must block;
	// one made only of workloads (usability) passes, as the workloads work.
	tested := map[string]bool{}
	for _, s := range probes.Catalog() {
		if s.Expected(rec.Target.Profile) == probes.Blocked {
			tested[s.Criterion] = true
		}
	}
	for _, c := range rec.Verdict.Criteria {
		if tested[c.ID] && c.Status != evidence.StatusFail {
			t.Errorf("criterion %s: %s, want fail", c.ID, c.Status)
		}
	}
	// Host-side confirmation where the host can see the escape itself.
	for _, r := range rec.Results {
		switch r.Probe {
		case "metadata.aws-imdsv1", "metadata.aws-imdsv2":
			if it, ok := hostItem(r, evidence.SourceCanary, "metadata-hit"); !ok || it.Indicates != probes.Escaped {
				t.Errorf("%s: no metadata canary hit with the probe's token: %+v", r.Probe, r.Evidence)
			}
		case "host.honeyfile":
			if it, ok := hostItem(r, evidence.SourceCanary, "honeyfile"); !ok || it.Indicates != probes.Escaped {
				t.Errorf("%s: the honeyfile token was not confirmed by the host: %+v", r.Probe, r.Evidence)
			}
		}
	}
	if rec.Image.Digest == "" || rec.Host.Kernel == "" || len(rec.Sandboxes) == 0 || rec.Sandboxes[0].View == nil {
		t.Errorf("record lacks image digest, kernel or runtime view: %+v %+v", rec.Image, rec.Host)
	}
	for _, sb := range rec.Sandboxes {
		if len(sb.Teardown) > 0 {
			t.Errorf("sandbox %s left %v", sb.Name, sb.Teardown)
		}
	}
	if len(rec.NetworkLeftovers) > 0 {
		t.Errorf("the harness network left %v", rec.NetworkLeftovers)
	}
	for _, f := range []string{"evidence.jsonl", "run.json", "junit.xml", "summary.md", "results.sarif", "report.html"} {
		if _, err := os.Stat(filepath.Join(r.out, f)); err != nil {
			t.Errorf("report %s missing: %v", f, err)
		}
	}
}

func TestHardenedReferenceEveryProbeBlocked(t *testing.T) {
	for _, target := range []string{"hardened.yaml", "hardened-gvisor.yaml"} {
		t.Run(target, func(t *testing.T) {
			r := sharedRun(t, target, false)
			rec := r.mustRecord(t)
			if r.code != 0 {
				t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			// The positive control: every attempt is blocked, and the workloads
			// the profile needs still work (expected "escaped": they got through).
			everyControl(t, rec, positiveWant(rec.Target.Profile))
			if rec.Verdict == nil || !rec.Verdict.Pass {
				t.Errorf("verdict %+v: the hardened reference must pass", rec.Verdict)
			}
			for _, sb := range rec.Sandboxes {
				if len(sb.Teardown) > 0 {
					t.Errorf("sandbox %s left %v", sb.Name, sb.Teardown)
				}
			}
		})
	}
}

// forgeBinary builds a probe binary that lies: see testdata/forgeprobe.
func forgeBinary(t *testing.T, mode string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandcheck-probe")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.forgeMode="+mode, "-o", bin, "./testdata/forgeprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the forging probe: %v\n%s", err, out)
	}
	return bin
}

// TestForgedProbeOutputCannotPass runs a probe binary that reports every
// probe blocked (or floods its output) on the weak reference: the host
// evidence and the strict parser must keep the verdict from passing.
func TestForgedProbeOutputCannotPass(t *testing.T) {
	for _, mode := range []string{"blocked", "flood", "extra", "garbage"} {
		t.Run(mode, func(t *testing.T) {
			bin := forgeBinary(t, mode)
			r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet",
				"--probe-binary", bin, "--label-filter", "privilege || metadata || host")
			rec := r.mustRecord(t)
			if rec.Verdict == nil || rec.Verdict.Pass || r.code != 1 {
				t.Fatalf("forged output (%s) gave exit %d and verdict %+v; want a failing verdict", mode, r.code, rec.Verdict)
			}
			if mode == "blocked" {
				joined := ""
				for _, c := range rec.Verdict.Criteria {
					joined += strings.Join(c.Reasons, "\n")
				}
				if !strings.Contains(joined, "contradict") && !strings.Contains(joined, "shows escaped") {
					t.Errorf("the verdict does not name the contradiction:\n%s", joined)
				}
			} else {
				applies := map[string]bool{}
				for _, s := range probes.Catalog() {
					applies[s.ID] = s.AppliesTo(rec.Runner)
				}
				for _, res := range rec.Results {
					want := probes.Inconclusive
					if !applies[res.Probe] {
						// Another platform's probe is never run here: the
						// forged binary has no say in it.
						want = probes.NotApplicable
					}
					if res.Outcome != want {
						t.Errorf("%s: outcome %s from %s output, want %s", res.Probe, res.Outcome, mode, want)
					}
				}
			}
		})
	}
}

// TestHarnessFailuresExitTwo covers a missing engine and a sandbox that never
// gets ready: both are harness errors (exit 2), named on stderr, and the
// evidence gathered so far stays on disk.
func TestHarnessFailuresExitTwo(t *testing.T) {
	t.Run("no engine", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
		r := sandcheck(t, "run", "--target", "fixtures/targets/hardened.yaml")
		if r.code != 2 || !strings.Contains(r.stderr, "docker") {
			t.Errorf("exit %d, stderr %q; want 2 naming the engine", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(r.out, "evidence.jsonl")); err != nil {
			t.Errorf("evidence.jsonl missing: %v", err)
		}
	})
	t.Run("sandbox never ready", func(t *testing.T) {
		bin := forgeBinary(t, "hang")
		// Readiness is what an exec-mode sandbox waits for before its
		// first task; the hardened reference itself launches tasks.
		r := sandcheck(t, "run", "--target", execTarget(t, "hardened.yaml"), "--probes", "privilege.root-uid",
			"--probe-binary", bin, "--start-timeout", "5s")
		if r.code != 2 || !strings.Contains(r.stderr, "did not start") {
			t.Errorf("exit %d, stderr %q; want 2 naming the start failure", r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(r.out, "evidence.jsonl"))
		if err != nil || !strings.Contains(string(b), "harness-error") {
			t.Errorf("evidence.jsonl lacks the harness error: %v\n%s", err, b)
		}
		rec := r.mustRecord(t)
		if rec.Verdict != nil && rec.Verdict.Pass {
			t.Errorf("a run whose sandbox never started passed: %+v", rec.Verdict)
		}
	})
}

// execTarget writes a copy of a reference target that launches tasks by exec
// (one long-lived sandbox) and returns its path; the copy's seccomp profile
// is the reference's own, by absolute path.
func execTarget(t *testing.T, name string) string {
	t.Helper()
	return editedReference(t, name, "exec-"+name, edit{"launch: task", "launch: exec"})
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: kata\n  network: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noImage := filepath.Join(dir, "noimage.yaml")
	if err := os.WriteFile(noImage, []byte("schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: sandcheck/does-not-exist:none\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing target", []string{"run", "--target", filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"malformed target", []string{"run", "--target", bad}, "bad.yaml:7:12: $.docker.runtime"},
		{"unknown probe", []string{"run", "--target", "fixtures/targets/hardened.yaml", "--probes", "nosuch.*"}, "no probe matches"},
		{"unknown label", []string{"run", "--target", "fixtures/targets/hardened.yaml", "--label-filter", "privilege && shiny"}, `unknown label "shiny"`},
		{"image not local", []string{"run", "--target", noImage}, "sandcheck/does-not-exist:none"},
		{"unknown flag", []string{"run", "--frobnicate"}, "frobnicate"},
		{"validate", []string{"targets", "validate", bad}, "bad.yaml:7:12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sandcheck(t, c.args...)
			if r.code != 2 {
				t.Errorf("exit code %d, want 2\nstdout:%s\nstderr:%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr does not name %q:\n%s", c.want, r.stderr)
			}
		})
	}
}

// A run that cannot write its evidence exits 2 with the reason, never 0 or
// 1 (issue 16 item 2); an unknown --format is refused before anything
// starts.
func TestWriteFailuresExit2(t *testing.T) {
	bin := binDir(t)
	cli := func(out string, extra ...string) (int, string) {
		args := append([]string{"run", "--target", "fixtures/targets/hardened.yaml", "--probes", "privilege.*", "--out-dir", out}, extra...)
		cmd := exec.Command(filepath.Join(bin, "sandcheck"), args...)
		cmd.Dir = ".."
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(b)
		} else if err != nil {
			t.Fatalf("running sandcheck: %v", err)
		}
		return 0, string(b)
	}
	full := t.TempDir()
	if b, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8k", "sandcheck-e2e-full", full).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tiny tmpfs: %v: %s", err, b)
	}
	t.Cleanup(func() { _ = exec.Command("umount", full).Run() })
	if code, out := cli(full); code != 2 || !strings.Contains(out, "no space left on device") {
		t.Errorf("full output folder: exit %d, want 2 with the reason\n%s", code, out)
	}
	empty := t.TempDir()
	start := time.Now()
	if code, out := cli(empty, "--output", "pdf"); code != 2 || !strings.Contains(out, `"pdf"`) {
		t.Errorf("--format pdf: exit %d, want 2 naming the format\n%s", code, out)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 || time.Since(start) > 10*time.Second {
		t.Errorf("--format pdf must be refused before anything starts: %d entries written in %s", len(ents), time.Since(start))
	}
}
