package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// TestWeakRunIsStableAcrossRunsAndParallelism: a scheduled job compares
// tonight's alerts with last night's by fingerprint, so every fingerprint,
// rule and location must be a function of the target, the probe and the
// finding, never of a run's sandbox names, tokens or scheduling. The weak
// reference is run a second time, one probe after another (--parallel 1),
// beside the package's shared run (--parallel at its default, the
// machine's CPUs): the two must open the same alerts at the same places,
// grade every probe alike and reach the same verdict (issue 24 item 1).
func TestWeakRunIsStableAcrossRunsAndParallelism(t *testing.T) {
	first := sharedRun(t, "weak.yaml", false)
	second := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--parallel", "1")
	a, b := first.mustRecord(t), second.mustRecord(t)
	if first.code != 1 || second.code != 1 {
		t.Errorf("exit codes %d and %d, want 1 for both", first.code, second.code)
	}
	if a.RunID == b.RunID {
		t.Fatalf("both records name run %s: the test compares one run with itself", a.RunID)
	}
	graded := func(rec *evidence.Record) map[string]string {
		out := map[string]string{}
		for i, res := range rec.Results {
			out[res.Probe] = string(rec.Effective(i))
		}
		return out
	}
	ga, gb := graded(a), graded(b)
	for p, o := range ga {
		if gb[p] != o {
			t.Errorf("%s graded %q in the shared run, %q at --parallel 1", p, o, gb[p])
		}
	}
	if len(ga) != len(gb) {
		t.Errorf("%d results in the shared run, %d at --parallel 1", len(ga), len(gb))
	}
	status := func(rec *evidence.Record) []string {
		var out []string
		for _, c := range rec.Verdict.Criteria {
			out = append(out, c.ID+"="+string(c.Status))
		}
		return out
	}
	if sa, sb := status(a), status(b); !slices.Equal(sa, sb) || a.Verdict.Pass != b.Verdict.Pass {
		t.Errorf("verdicts differ: %v (pass %v) and %v (pass %v)", sa, a.Verdict.Pass, sb, b.Verdict.Pass)
	}
	fa, fb := sarifAlerts(t, first.out), sarifAlerts(t, second.out)
	if len(fa) == 0 {
		t.Fatal("the weak run opens no SARIF alert: the comparison proves nothing")
	}
	for k := range fa {
		if !fb[k] {
			t.Errorf("alert only in the shared run: %s", k)
		}
	}
	for k := range fb {
		if !fa[k] {
			t.Errorf("alert only in the --parallel 1 run: %s", k)
		}
	}
}

// sarifAlerts reads dir's results.sarif and returns each result as its
// rule, fingerprint and location.
func sarifAlerts(t *testing.T, dir string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "results.sarif"))
	if err != nil {
		t.Fatal(err)
	}
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID              string            `json:"ruleId"`
				PartialFingerprints map[string]string `json:"partialFingerprints"`
				Locations           []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(raw, &log); err != nil || len(log.Runs) != 1 {
		t.Fatalf("%s/results.sarif: %v (%d runs, want 1)", dir, err, len(log.Runs))
	}
	out := map[string]bool{}
	for _, r := range log.Runs[0].Results {
		k := fmt.Sprintf("%s %v", r.RuleID, r.PartialFingerprints)
		for _, l := range r.Locations {
			k += fmt.Sprintf(" %s:%d", l.PhysicalLocation.ArtifactLocation.URI, l.PhysicalLocation.Region.StartLine)
		}
		if out[k] {
			t.Errorf("%s/results.sarif: alert %s twice", dir, k)
		}
		out[k] = true
	}
	return out
}
