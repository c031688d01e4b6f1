package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/probes"
)

// TestHungBatchIsCutAtItsOwnBudget: the hardened reference (task launch:
// the shared probes run as one batch) with syscalls.[s-z]*, whose first
// probe's deadline (its 5 s and one sandbox start) is below the batch's own
// budget (the sum of its 9 probes' timeouts, 45 s); the probe binary hangs
// before the fifth probe. Before, the batch was cut at the first probe's
// deadline with one identical harness error per probe (127 on the whole
// catalog). Now it is cut at its own budget, the four probes before the
// hung one keep their results, the hung one alone is reported (one harness
// error), and the four after it run again in a fresh sandbox. The run
// allows 20 s per sandbox start (Config.StartAllowance) instead of 90 s, so
// the test waits out a 45 s budget, not 110 s; the order of the two bounds
// is what it proves, and it is the same.
const (
	hungSelection = "syscalls.[s-z]*"
	hungAllowance = 20 * time.Second
)

func TestHungBatchIsCutAtItsOwnBudget(t *testing.T) {
	probe := realRunPrereqs(t)
	sel, err := engine.Select(hungSelection, "")
	if err != nil {
		t.Fatal(err)
	}
	var shared []string
	var budget time.Duration
	for _, s := range sel {
		if s.Sandbox == probes.Shared {
			shared = append(shared, s.ID)
			budget += s.Timeout.D()
		}
	}
	first := engine.SpecTimeoutWith(sel[0], hungAllowance)
	if len(shared) < 6 || budget <= first {
		t.Fatalf("the selection no longer has a batch budget (%s) past its first probe's deadline (%s): the test proves nothing", budget, first)
	}
	hung := shared[4]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	o, err := engine.Run(ctx, engine.Config{TargetPath: "../fixtures/targets/hardened.yaml", OutDir: t.TempDir(),
		ProbeBinary: probe, Probes: hungSelection, Version: "test", NoTrace: true, Parallel: 1, HangProbe: hung, StartAllowance: hungAllowance})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %s; batch budget %s; first probe's deadline %s", took.Round(time.Second), budget, first)
	for _, e := range o.HarnessErrors {
		t.Logf("harness error: %s", e)
	}
	if len(o.HarnessErrors) != 1 || !strings.Contains(o.HarnessErrors[0], "probe "+hung+" hung the shared batch") {
		t.Errorf("harness errors %d, want one naming %s", len(o.HarnessErrors), hung)
	}
	if took < budget {
		t.Errorf("the run took %s: the batch was cut before its own budget of %s", took, budget)
	}
	byID := map[string]int{}
	for i, r := range o.Record.Results {
		byID[r.Probe] = i
	}
	for i, id := range shared {
		j, ok := byID[id]
		if !ok {
			t.Errorf("no result for %s", id)
			continue
		}
		r := o.Record.Results[j]
		switch {
		case id == hung:
			if r.Outcome != probes.Inconclusive || !strings.HasPrefix(r.Detail, "probe hung: its task was cut at its budget") {
				t.Errorf("hung probe %s: %s %q", id, r.Outcome, r.Detail)
			}
		case strings.HasPrefix(r.Detail, "harness:") || strings.HasPrefix(r.Detail, "not run") || r.Outcome == probes.NotTested:
			t.Errorf("probe %d %s (%s the hung one) did not run: %s %q", i, id, map[bool]string{true: "before", false: "after"}[i < 4], r.Outcome, r.Detail)
		}
	}
	// The probes after the hung one ran in a second sandbox.
	after := o.Record.Results[byID[shared[5]]].Sandbox
	before := o.Record.Results[byID[shared[0]]].Sandbox
	if after == "" || after == before {
		t.Errorf("the probes after the hung one did not run in a fresh sandbox (%q, %q)", before, after)
	}
}
