package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/probes"
)

// A parallel run gives what a serial run of the same selection gives:
// the same outcome per probe, in the same order, and the same grade per
// criterion.
func TestParallelMatchesSerial(t *testing.T) {
	probe := realRunPrereqs(t)
	for _, tc := range []struct{ target, glob string }{
		// runc, exec launch: every placement.
		{"hardened.yaml", "[rpt]*.*"},
		// gVisor, task launch: the limit probes, where contention could
		// change an outcome. Not resources.cpu-deadline: on a machine
		// loaded by other work its outcome under gVisor flips even between
		// two serial runs (the sentry's CPU clock runs ahead of the host's
		// cgroup), so it cannot tell parallel from serial.
		{"hardened-gvisor.yaml", "resources.[^c]*"},
	} {
		t.Run(tc.target, func(t *testing.T) { parallelMatchesSerial(t, probe, tc.target, tc.glob) })
	}
}

func parallelMatchesSerial(t *testing.T, probe, target, glob string) {
	run := func(parallel int) *engine.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		o, err := engine.Run(ctx, engine.Config{TargetPath: "../fixtures/targets/" + target, OutDir: t.TempDir(),
			ProbeBinary: probe, Probes: glob, Version: "test", NoTrace: true, Parallel: parallel})
		if err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		if len(o.HarnessErrors) > 0 {
			t.Fatalf("parallel %d: harness errors %v", parallel, o.HarnessErrors)
		}
		return o
	}
	serial, par := run(1), run(4)
	sel, err := engine.Select(glob, "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[probes.Placement]int{}
	for _, s := range sel {
		kinds[s.Sandbox]++
	}
	if kinds[probes.Shared] == 0 || kinds[probes.Own] < 2 || kinds[probes.Pair] == 0 {
		t.Fatalf("the selection must hold every placement to test anything: %v", kinds)
	}
	if len(serial.Record.Results) != len(sel) || len(par.Record.Results) != len(sel) {
		t.Fatalf("results: serial %d, parallel %d, selected %d", len(serial.Record.Results), len(par.Record.Results), len(sel))
	}
	for i, s := range serial.Record.Results {
		p := par.Record.Results[i]
		if s.Probe != p.Probe || s.Outcome != p.Outcome {
			t.Errorf("result %d: serial %s %s, parallel %s %s (%s)", i, s.Probe, s.Outcome, p.Probe, p.Outcome, p.Detail)
		}
	}
	if diff := criteriaDiff(serial, par); len(diff) > 0 {
		// The results agree but a criterion does not: host evidence under
		// gVisor on a loaded machine varies between two serial runs too.
		// A second serial run that agrees with the parallel one shows the
		// difference is not parallelism's; one that does not fails.
		t.Logf("criteria differ from the first serial run (%v); running serially again", diff)
		if diff := criteriaDiff(run(1), par); len(diff) > 0 {
			for _, d := range diff {
				t.Error(d)
			}
		}
	}
	t.Logf("serial %.1fs, parallel %.1fs (%d probes: %v)", serial.Record.Timing.TotalSeconds, par.Record.Timing.TotalSeconds, len(sel), kinds)
}

// criteriaDiff lists the criteria whose status differs between two runs.
func criteriaDiff(a, b *engine.Outcome) []string {
	status := map[string]string{}
	for _, c := range a.Record.Verdict.Criteria {
		status[c.ID] = string(c.Status)
	}
	var out []string
	for _, c := range b.Record.Verdict.Criteria {
		if status[c.ID] != string(c.Status) {
			out = append(out, fmt.Sprintf("criterion %s: serial %s, parallel %s", c.ID, status[c.ID], c.Status))
		}
	}
	return out
}
