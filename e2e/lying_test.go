package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// TestLyingProbesCannotPassIOUring runs lying probe binaries against the
// hardened reference with a seccomp profile that lets io_uring through
// (which the honest probe fails): one says "io_uring is not built into this
// kernel" (not-applicable), two install a seccomp filter of their own
// (through seccomp() and through prctl) so that the kernel really refuses
// their io_uring_setup, and report that refusal. On the landed main before
// issue 28 the first and the seccomp() variant exited 0 with every
// criterion passed. None may exit 0; each verdict must say why.
func TestLyingProbesCannotPassIOUring(t *testing.T) {
	target := ioUringTarget(t)
	for _, tt := range []struct{ mode, want string }{
		{"na", "probe syscalls.io-uring-setup reported not-applicable but"},
		{"selfseccomp", "installed a seccomp filter (seccomp(SECCOMP_SET_MODE_FILTER)"},
		{"selfseccomp-prctl", "installed a seccomp filter (prctl(PR_SET_SECCOMP)"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			liar := forgeBinary(t, tt.mode)
			r := sandcheck(t, "run", "--target", target, "--quiet", "--probe-binary", liar, "--probes", "syscalls.io-uring-setup")
			rec := r.mustRecord(t)
			if r.code == 0 || rec.Verdict == nil || rec.Verdict.Pass {
				t.Fatalf("the %s liar gave exit %d, verdict %+v; want a failing verdict", tt.mode, r.code, rec.Verdict)
			}
			var all []string
			for _, c := range rec.Verdict.Criteria {
				all = append(all, c.Reasons...)
			}
			if joined := strings.Join(all, "\n"); !strings.Contains(joined, tt.want) {
				t.Errorf("the %s liar's verdict does not say %q:\n%s", tt.mode, tt.want, joined)
			}
		})
	}
}

// TestNotApplicableEverywhereCannotHide: a probe answering not-applicable
// for every probe on the weak reference fails, and every probe the catalog
// expects to be tried that no host fact excuses is named.
func TestNotApplicableEverywhereCannotHide(t *testing.T) {
	binDir(t)
	liar := forgeBinary(t, "na")
	r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--probe-binary", liar,
		"--label-filter", "privilege || syscalls || resources")
	rec := r.mustRecord(t)
	if r.code != 1 || rec.Verdict == nil || rec.Verdict.Pass {
		t.Fatalf("not-applicable everywhere gave exit %d, verdict %+v; want a failing verdict", r.code, rec.Verdict)
	}
	named := 0
	for _, c := range rec.Verdict.Criteria {
		for _, m := range c.Reasons {
			if strings.Contains(m, "reported not-applicable but") {
				named++
			}
		}
	}
	if named < 20 {
		t.Errorf("only %d results are named unconfirmed not-applicable; want every expected-blocked probe without a host fact", named)
	}
	t.Logf("%d results unconfirmed not-applicable", named)
}

// TestForgedTerminalLines: a probe whose detail holds "\nverdict: PASS\n",
// ESC, BEL, NUL and a bidi override. On the old console it printed lines
// reading exactly "verdict: PASS" before the real "verdict: FAIL" under
// -q. Now, quiet or verbose, the only verdict line is the real one and no
// control byte reaches the output.
func TestForgedTerminalLines(t *testing.T) {
	binDir(t)
	liar := forgeBinary(t, "forgelines")
	for _, mode := range []string{"--quiet", "--verbose"} {
		t.Run(mode, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", mode, "--probe-binary", liar, "--probes", "privilege.root-uid")
			out := r.stdout + r.stderr
			verdicts := 0
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "verdict: PASS") && strings.TrimSpace(l) == "verdict: PASS" {
					t.Errorf("a forged verdict line reached the output: %q", l)
				}
				if strings.HasPrefix(l, "verdict: ") {
					verdicts++
				}
			}
			if r.code != 1 || verdicts != 1 {
				t.Errorf("exit %d with %d verdict lines, want exit 1 and one", r.code, verdicts)
			}
			for _, c := range []string{"\x1b", "\x07", "\x00", "\u202e"} {
				if strings.Contains(out, c) {
					t.Errorf("the output carries %q", c)
				}
			}
			if !strings.Contains(out, `x\nverdict: PASS\n\x1b[2K`) {
				t.Errorf("the forged detail is not shown escaped:\n%s", out)
			}
		})
	}
}

// TestBlockedEverywhereCannotConfirmAbsence: a probe answering "blocked"
// for every teardown and persistence probe on the weak reference plants
// nothing, so nothing is left after teardown. On the landed main before
// issue 28 item 2 the five teardown probes read "blocked as expected
// (confirmed by teardown/...)". Absence is not evidence: the weak box had
// the engine socket, writable host folders, SYS_ADMIN and the host's PID
// namespace, so without a host-seen plant none of them, nor a persistence
// probe whose host check found only "nothing changed", may read as
// confirmed, each is named unconfirmed with the marker it lacks, and the
// run fails.
func TestBlockedEverywhereCannotConfirmAbsence(t *testing.T) {
	_, rec, reasons := blockedEverywhere(t, "--label-filter", "teardown || persistence")
	spec := map[string]probes.Spec{}
	for _, s := range probes.Catalog() {
		spec[s.ID] = s
	}
	teardown, hostChecked := 0, 0
	for i, res := range rec.Results {
		// The liar's blocked, which no host fact confirms: the result's
		// own outcome reads unconfirmed (no check, no pass).
		if eff := rec.Effective(i); eff != evidence.Unconfirmed {
			t.Errorf("%s: effective %s, want unconfirmed (the liar's blocked, no host fact confirming it)", res.Probe, eff)
		}
		s := spec[res.Probe]
		if s.Category != "teardown" && s.Category != "persistence" {
			t.Errorf("%s ran though the filter selects teardown and persistence only", res.Probe)
			continue
		}
		for _, m := range reasons {
			if strings.HasPrefix(m, "probe "+res.Probe+" blocked as expected (confirmed by") {
				t.Errorf("the liar's %s reads confirmed: %q", res.Probe, m)
			}
		}
		switch {
		case s.Category == "teardown":
			teardown++
			if !named(reasons, "probe "+res.Probe+" reported blocked but the host has no marker that a") {
				t.Errorf("teardown probe %s is not named unconfirmed for its missing marker; evidence %+v", res.Probe, res.Evidence)
			}
			if named(reasons, "probe "+res.Probe+" blocked as expected") {
				t.Errorf("teardown probe %s passes on the liar's word", res.Probe)
			}
		case len(s.Host) > 0:
			hostChecked++
			if !named(reasons, "probe "+res.Probe+" reported blocked but no host fact confirms") {
				t.Errorf("persistence probe %s (host evidence %v) is not named unconfirmed; evidence %+v", res.Probe, s.Host, res.Evidence)
			}
		}
	}
	persistence := 0
	for _, s := range probes.Catalog() {
		if s.Category == "persistence" {
			persistence++
		}
	}
	if teardown != 5 || hostChecked != persistence {
		t.Errorf("%d teardown and %d host-checked persistence results; want the 5 teardown probes and all %d persistence probes, each with host evidence", teardown, hostChecked, persistence)
	}
}

// TestBlockedEverywhereCannotConfirmCarryover: the SIGTERM-ignoring and
// setsid daemons are pair probes of the resources family: one task leaves
// a process, the next looks for it. The weak reference hands out tasks by
// exec into one box, so a process the plant task left meets the check
// task; a liar that plants nothing and says "blocked" read "blocked as
// expected" before the carry-over host fact (no host evidence, not an
// absence family). The host's
// fact (the check ran in the plant's own box) does not confirm it: each is
// named unconfirmed and bounded-resources does not pass.
func TestBlockedEverywhereCannotConfirmCarryover(t *testing.T) {
	_, rec, reasons := blockedEverywhere(t, "--probes", "resources.s[ei][tg]*")
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "bounded-resources" && c.Status == evidence.StatusPass {
			t.Errorf("bounded-resources passes on the liar's word: %q", c.Reasons)
		}
	}
	got := map[string]bool{}
	for i, res := range rec.Results {
		got[res.Probe] = true
		if eff := rec.Effective(i); eff != evidence.Unconfirmed {
			t.Errorf("%s: effective %s, want unconfirmed (the liar's blocked, no host fact confirming it)", res.Probe, eff)
		}
		it, ok := hostItem(res, evidence.SourceRuntime, "carryover-processes")
		if !ok || it.Indicates != "" || it.Data["precondition"] != "none" {
			t.Errorf("%s: carry-over item %+v (found %v), want one without indication, precondition none", res.Probe, it, ok)
		}
		if !named(reasons, "probe "+res.Probe+" reported blocked but no host fact confirms") {
			t.Errorf("%s is not named unconfirmed; reasons %q", res.Probe, reasons)
		}
		if named(reasons, "probe "+res.Probe+" blocked as expected") {
			t.Errorf("%s passes on the liar's word", res.Probe)
		}
	}
	if !got["resources.sigterm-ignore"] || !got["resources.setsid-daemon"] || len(got) != 2 {
		t.Errorf("results for %v; want resources.sigterm-ignore and resources.setsid-daemon", got)
	}
}

// named reports whether a verdict reason starts with prefix.
// blockedEverywhere runs the probe binary that answers "blocked" for every
// probe against the weak reference with the selection given, fails the
// test unless the run exits 1 with a failing verdict, and returns the run,
// its record and every criterion's reasons.
func blockedEverywhere(t *testing.T, selection ...string) (run, *evidence.Record, []string) {
	t.Helper()
	binDir(t)
	liar := forgeBinary(t, "blocked-all")
	r := sandcheck(t, append([]string{"run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--probe-binary", liar}, selection...)...)
	rec := r.mustRecord(t)
	if r.code != 1 || rec.Verdict == nil || rec.Verdict.Pass {
		t.Fatalf("blocked everywhere (%s) gave exit %d, verdict %+v; want exit 1 and a failing verdict", strings.Join(selection, " "), r.code, rec.Verdict)
	}
	var reasons []string
	for _, c := range rec.Verdict.Criteria {
		reasons = append(reasons, c.Reasons...)
	}
	return r, rec, reasons
}

func named(reasons []string, prefix string) bool {
	for _, m := range reasons {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// TestCriterionWaiverWarnsEverywhere: a waiver of a whole criterion is
// admitted only with --allow-criterion-waivers, and where it applies it
// takes the criterion out of the gate; the verdict then warns, and the
// warning reaches the console and every report format (run.json, JUnit's
// properties, SARIF's notifications, the Markdown summary, the HTML page).
func TestCriterionWaiverWarnsEverywhere(t *testing.T) {
	binDir(t)
	soon := time.Now().AddDate(0, 0, 30).Format("2006-01-02")
	file := filepath.Join(t.TempDir(), "w.yaml")
	body := "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - criterion: hardened-runtime\n    target: weak-reference\n    owner: o@example.com\n    reason: pilot\n    expires: " + soon + "\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := sandcheck(t, "policy", "eval", "--input", "policies/testdata/weak.run.json", "--waivers", file,
		"--allow-criterion-waivers", "--out", out)
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (the weak run fails other criteria)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	const want = "waives the whole criterion hardened-runtime (admitted by --allow-criterion-waivers)"
	if !strings.Contains(r.stdout, "warning: waiver ") || !strings.Contains(r.stdout, ":3 (owner o@example.com) "+want) {
		t.Errorf("the console does not warn of the criterion waiver:\n%s", r.stdout)
	}
	for _, f := range []string{"run.json", "junit.xml", "results.sarif", "summary.md", "report.html"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Errorf("report %s: %v", f, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("report %s does not warn of the criterion waiver", f)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec evidence.Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Verdict == nil {
		t.Fatalf("run.json: %v (verdict %v)", err, rec.Verdict)
	}
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "hardened-runtime" && c.Status != evidence.StatusWaived {
			t.Errorf("hardened-runtime is %s, want waived (the test must reach an applied waiver)", c.Status)
		}
	}
}

// TestTaskSandboxesAreViewedBeforeClose: with launch: task a probe is the
// first process of its own sandbox, and the host must still look for the
// probe's plant outside the box after the task ends and before the
// sandbox closes, as it does for a task exec'd into a box (issue 28: task
// sandboxes were closed unviewed, so a box with an avenue could never have
// its clean teardown confirmed). The weak reference in task mode plants a
// container through the engine socket: the host sees it before close and
// finds it after.
func TestTaskSandboxesAreViewedBeforeClose(t *testing.T) {
	binDir(t)
	r := sandcheck(t, "run", "--target", weakInTaskMode(t), "--quiet", "--probes", "teardown.container")
	rec := r.mustRecord(t)
	if r.code != 1 || len(rec.Results) != 1 {
		t.Fatalf("exit %d, %d results; want exit 1 and teardown.container's result\n%s", r.code, len(rec.Results), r.stderr)
	}
	res := rec.Results[0]
	it, ok := hostItem(res, evidence.SourceTeardown, "teardown.container")
	if !ok || it.Indicates != probes.Escaped {
		t.Fatalf("teardown item %+v (found %v), want escaped; evidence %+v", it, ok, res.Evidence)
	}
	if it.Data["seen"] == "" || !strings.Contains(it.Data["seen"], "carrying the token") {
		t.Errorf("the host did not see the task's plant before close: item %+v", it)
	}
}

// weakInTaskMode writes the weak reference with launch: task (each probe,
// or the batch of shared ones, the first process of a sandbox of its own)
// and returns its path.
func weakInTaskMode(t *testing.T) string {
	t.Helper()
	return inTaskMode(t, "weak.yaml", "  runtime: runc\n", "  runtime: runc\n  launch: task\n")
}

// inTaskMode writes the reference fixture with the text at replaced by
// with (its launch: task), in a temporary folder.
func inTaskMode(t *testing.T, fixture, at, with string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../fixtures/targets", fixture))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(src), at) != 1 || strings.Contains(strings.Replace(string(src), at, "", 1), "launch:") {
		t.Fatalf("%s no longer has %q once, or names its launch elsewhere; update this test", fixture, at)
	}
	target := filepath.Join(t.TempDir(), strings.TrimSuffix(fixture, ".yaml")+"-task.yaml")
	if err := os.WriteFile(target, []byte(strings.Replace(string(src), at, with, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return target
}

// TestFailedPlantIsNoAbsence: a two-phase probe's check that finds nothing
// counts only after a plant task that completed. The forged probe's plant
// phase is inconclusive (as an honest plant cut at its budget under load
// is) and its check finds nothing: on the weak reference, where both
// markers really survive, each result must be inconclusive and name the
// plant, never blocked. make soak saw persistence.kernel-keyring and
// persistence.marker-next-run read blocked on the weak bwrap reference in
// one run of five.
func TestFailedPlantIsNoAbsence(t *testing.T) {
	binDir(t)
	forged := forgeBinary(t, "plant-fails")
	r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--probe-binary", forged,
		"--probes", "persistence.marker-next-run,persistence.kernel-keyring")
	rec := r.mustRecord(t)
	if r.code == 0 || len(rec.Results) != 2 {
		t.Fatalf("exit %d with %d results; want a failing run of the two probes\n%s", r.code, len(rec.Results), r.stderr)
	}
	for i, res := range rec.Results {
		if eff := rec.Effective(i); eff != probes.Inconclusive || !strings.Contains(res.Detail, "the plant task was inconclusive: the plant was cut short") {
			t.Errorf("%s: effective %s, detail %q; want inconclusive naming the plant", res.Probe, eff, res.Detail)
		}
	}
}
