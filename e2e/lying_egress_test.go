package e2e

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// fileProbes are the egress and metadata probes with no network path for
// the host to dial: metadata.k8s-service-account reads a token file the
// platform mounts. Its host fact is the runtime's mount of the file the
// harness planted (runtime/honeytoken-exposed).
var fileProbes = map[string]bool{"metadata.k8s-service-account": true}

// junitCases reads the run's JUnit file: each probe's test case and the
// failure messages it carries (none: the probe passed).
func junitCases(t *testing.T, dir string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name     string `xml:"name,attr"`
				Failures []struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	out := map[string][]string{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			msgs := out[c.Name]
			for _, f := range c.Failures {
				msgs = append(msgs, f.Message)
			}
			out[c.Name] = msgs
		}
	}
	return out
}

// TestBlockedEverywhereCannotCloseOpenPaths runs the probe binary that
// answers "blocked" for every probe against the weak reference, whose
// network reaches every harness canary, on the egress and metadata
// families. The canaries see nothing (the liar sends nothing), and absence
// is no evidence: before each probe the host dials, from the sandbox's own
// network namespace, the canary addresses the probe is handed and finds
// them open. On the landed main before this test every one of those
// probes read "blocked as expected". Each must now be named unconfirmed
// for the open path, none may pass, and the run must exit 1.
func TestBlockedEverywhereCannotCloseOpenPaths(t *testing.T) {
	r, rec, reasons := blockedEverywhere(t, "--label-filter", "egress || metadata")
	cases := junitCases(t, r.out)
	checked := 0
	for i, res := range rec.Results {
		if res.Category != "egress" && res.Category != "metadata" {
			t.Errorf("%s ran though the filter selects egress and metadata only", res.Probe)
			continue
		}
		if res.Outcome == probes.NotApplicable {
			continue // another platform's probe
		}
		if fileProbes[res.Probe] {
			// The weak box mounts the planted token where the kubelet
			// would: the liar's "blocked" beside it is unconfirmed.
			want := "probe " + res.Probe + " reported blocked but no host fact confirms it, and the planted file is in the box: runtime/honeytoken-exposed: "
			if _, ok := hostItem(res, evidence.SourceRuntime, "honeytoken-exposed"); !ok {
				t.Errorf("%s: no runtime/honeytoken-exposed item (evidence %+v)", res.Probe, res.Evidence)
			} else if !named(reasons, want) || len(cases[res.Probe]) == 0 {
				t.Errorf("%s is not named unconfirmed for the mounted token; reasons %q, JUnit failures %q", res.Probe, reasons, cases[res.Probe])
			}
			if named(reasons, "probe "+res.Probe+" blocked as expected") {
				t.Errorf("%s passes on the liar's word", res.Probe)
			}
			checked++
			continue
		}
		// The liar's blocked, which no host fact confirms: the result's
		// own outcome reads unconfirmed (no check, no pass).
		if eff := rec.Effective(i); eff != evidence.Unconfirmed {
			t.Errorf("%s: effective %s, want unconfirmed (the liar's blocked, no host fact confirming it)", res.Probe, eff)
		}
		it, ok := hostItem(res, evidence.SourceRuntime, "netpath-open")
		if !ok || it.Data["open"] == "" {
			t.Errorf("%s: no runtime/netpath-open item with the open path (evidence %+v)", res.Probe, res.Evidence)
			continue
		}
		want := "probe " + res.Probe + " reported blocked but no host fact confirms it, and the path is open: runtime/netpath-open: "
		if !named(reasons, want) {
			t.Errorf("%s is not named unconfirmed for the open path %s; reasons %q", res.Probe, it.Data["open"], reasons)
		}
		if named(reasons, "probe "+res.Probe+" blocked as expected") {
			t.Errorf("%s passes on the liar's word", res.Probe)
		}
		msgs, ok := cases[res.Probe]
		if !ok || len(msgs) == 0 {
			t.Errorf("%s: its JUnit case passes (failures %q); want it failed unconfirmed", res.Probe, msgs)
		} else if !named(msgs, want) {
			t.Errorf("%s: its JUnit failures %q do not name the open path", res.Probe, msgs)
		}
		checked++
	}
	// 21 egress and 12 metadata probes have a path on this runner.
	if checked < 30 {
		t.Errorf("only %d egress and metadata probes were checked; want the families' network probes (30 or more)", checked)
	}
}

// TestHonestReferencesKeepTheirPaths runs the honest probe on the egress
// and metadata families of the hardened reference (no network: the host
// has no path to dial and today's grading stands) and of the mirror-only
// reference (the harness network, egress limited to the package mirror:
// the host finds every other path closed, which confirms the probes'
// blocked, and the mirror's open, where the probe escapes as the profile
// demands). Both must pass.
func TestHonestReferencesKeepTheirPaths(t *testing.T) {
	binDir(t)
	for _, target := range []string{"hardened", "mirror-only"} {
		t.Run(target, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+target+".yaml", "--quiet",
				"--label-filter", "egress || metadata")
			rec := r.mustRecord(t)
			if r.code != 0 || rec.Verdict == nil || !rec.Verdict.Pass {
				var reasons []string
				if rec.Verdict != nil {
					for _, c := range rec.Verdict.Criteria {
						reasons = append(reasons, c.Reasons...)
					}
				}
				t.Fatalf("the honest %s run gave exit %d; want 0. Reasons:\n%s", target, r.code, strings.Join(reasons, "\n"))
			}
			closed := 0
			for _, res := range rec.Results {
				if _, ok := hostItem(res, evidence.SourceRuntime, "netpath-open"); ok && res.Outcome == probes.Blocked {
					t.Errorf("%s: blocked with an open path, yet the run passed", res.Probe)
				}
				if _, ok := hostItem(res, evidence.SourceRuntime, "netpath-closed"); ok {
					closed++
				}
			}
			if target == "mirror-only" && closed < 30 {
				t.Errorf("mirror-only: %d probes with a closed path; want the families' network probes (30 or more)", closed)
			}
			if target == "hardened" && closed != 0 {
				t.Errorf("hardened (no network): %d path facts; the host has no harness network to dial there", closed)
			}
		})
	}
}

// TestBoxInItsOwnNamespaceCannotCloseOpenPaths: with launch: task the
// box's first process is the probe the box controls. On the weak
// references (Docker with SYS_ADMIN, bwrap as root with every capability)
// the liar moves that process into an empty network namespace of its own
// at once, stays there while the host looks, and answers "blocked" for
// every egress probe. The host must dial through the namespace the
// sandbox was given, not the one its first process is in now: Docker's
// own file for it (SandboxKey), and for bwrap the namespace pinned while
// bwrap's child waited on its --block-fd, before the box's code ran. It
// finds the harness canaries open and names each probe unconfirmed.
// Before, the host entered /proc/<pid>/ns/net: under Docker it found the
// container's address missing there and had no path fact at all; under
// bwrap it dialled the box's empty namespace.
func TestBoxInItsOwnNamespaceCannotCloseOpenPaths(t *testing.T) {
	binDir(t)
	liar := forgeBinary(t, "own-netns")
	for name, target := range map[string]string{
		"docker": weakInTaskMode(t),
		"bwrap":  inTaskMode(t, "bwrap-weak.yaml", "tasks:\n  launch: exec\n", "tasks:\n  launch: task\n"),
	} {
		t.Run(name, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", target, "--quiet", "--probe-binary", liar, "--label-filter", "egress")
			rec := r.mustRecord(t)
			if r.code != 1 || rec.Verdict == nil || rec.Verdict.Pass {
				t.Fatalf("exit %d, verdict %+v; want exit 1 and a failing verdict\n%s", r.code, rec.Verdict, r.stderr)
			}
			var reasons []string
			for _, c := range rec.Verdict.Criteria {
				reasons = append(reasons, c.Reasons...)
			}
			open := 0
			for _, res := range rec.Results {
				if it, ok := hostItem(res, evidence.SourceRuntime, "netpath-unknown"); ok {
					t.Errorf("%s: the host could not look: %s", res.Probe, it.Summary)
				}
				if _, ok := hostItem(res, evidence.SourceRuntime, "netpath-open"); !ok {
					continue
				}
				open++
				if named(reasons, "probe "+res.Probe+" blocked as expected") || !named(reasons, "probe "+res.Probe+" reported blocked but") {
					t.Errorf("%s has an open path but is not named unconfirmed", res.Probe)
				}
			}
			if open < 10 {
				t.Errorf("%d egress probes with an open path; want the harness canaries' (at least 10)", open)
			}
		})
	}
}
