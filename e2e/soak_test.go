//go:build soak

package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// soakTargets are the references a scheduled job would run night after
// night, with the floors for back-to-back runs; SANDCHECK_SOAK_SCALE
// (a percentage, default 100) scales every count, never below one run.
var soakTargets = []struct {
	target string
	runs   int
}{
	{"hardened.yaml", 20},
	{"hardened-gvisor.yaml", 10},
	{"bwrap-hardened.yaml", 10},
	{"weak.yaml", 5},
	{"bwrap-weak.yaml", 5},
}

// TestSoak (make soak) runs each reference back to back and fails on any
// change of verdict or criterion status between its runs, on any probe
// graded differently in one run than in the first, and on any
// inconclusive result that was not inconclusive in every run: a nightly
// job must see the same verdict for the same sandbox (issue 24 item 2).
// It logs one summary line per target, and per flapping probe the runs and
// the outcomes it took.
func TestSoak(t *testing.T) {
	binDir(t)
	scale := 100
	if s := os.Getenv("SANDCHECK_SOAK_SCALE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("SANDCHECK_SOAK_SCALE=%q: want a percentage from 1 to 1000", s)
		}
		scale = n
	}
	for _, st := range soakTargets {
		runs := max(1, st.runs*scale/100)
		t.Run(st.target, func(t *testing.T) {
			var (
				verdicts []string
				outcomes = map[string][]probes.Outcome{} // probe → outcome per run
				walls    []time.Duration
			)
			for i := range runs {
				start := time.Now()
				r := sandcheck(t, "run", "--target", "fixtures/targets/"+st.target, "--quiet")
				walls = append(walls, time.Since(start))
				rec := r.mustRecord(t)
				if rec.Verdict == nil {
					t.Fatalf("run %d: no verdict (exit %d)\n%s", i+1, r.code, r.stderr)
				}
				verdicts = append(verdicts, fmt.Sprintf("exit %d %s", r.code, verdictLine(rec)))
				for j, res := range rec.Results {
					o := outcomes[res.Probe]
					for len(o) < i {
						o = append(o, "") // not run that time
					}
					outcomes[res.Probe] = append(o, rec.Effective(j))
				}
			}
			for i, v := range verdicts[1:] {
				if v != verdicts[0] {
					t.Errorf("run %d: %s; run 1: %s", i+2, v, verdicts[0])
				}
			}
			var flapping []string
			for _, p := range slices.Sorted(maps.Keys(outcomes)) {
				o := outcomes[p]
				for len(o) < runs {
					o = append(o, "")
				}
				if slices.IndexFunc(o, func(x probes.Outcome) bool { return x != o[0] }) >= 0 {
					flapping = append(flapping, fmt.Sprintf("%s %v", p, o))
				}
			}
			for _, f := range flapping {
				t.Errorf("flapping: %s", f)
			}
			slices.Sort(walls)
			t.Logf("soak %s: %d runs, wall median %s (min %s, max %s), %d verdict(s) seen, %d flapping probe(s); verdict: %s",
				st.target, runs, walls[len(walls)/2].Round(time.Second), walls[0].Round(time.Second), walls[len(walls)-1].Round(time.Second),
				len(slices.Compact(slices.Sorted(slices.Values(verdicts)))), len(flapping), verdicts[0])
		})
	}
}

// verdictLine is the verdict as pass/fail and each criterion's status.
func verdictLine(rec *evidence.Record) string {
	parts := []string{"pass=" + strconv.FormatBool(rec.Verdict.Pass)}
	for _, c := range rec.Verdict.Criteria {
		parts = append(parts, c.ID+"="+string(c.Status))
	}
	return strings.Join(parts, " ")
}
