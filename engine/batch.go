package engine

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// In task mode the shared probes run as one batch: the first process of one
// fresh sandbox, bounded by the batch's own budget (the sum of its probes'
// timeouts), not by the deadline of whichever probe asked for the batch
// first. A probe that hangs the batch is cut there: the probes that
// reported before it keep their results, it alone is reported (one harness
// error), and the probes after it run again in a fresh sandbox, up to
// maxBatchRuns batches; any still left are reported not run, with one reason.

// maxBatchRuns bounds the batches of one run's shared probes: the first and
// the re-runs after a hung probe.
const maxBatchRuns = 3

// batchResult is one shared probe's report and the task that produced it.
type batchResult struct {
	report selfReport
	token  string
	sb     *sandbox
	err    error
}

// batchCtx is the context a batch runs under: the run's, not the
// deadline of the probe that asked for the batch first.
func (e *Engine) batchCtx(ctx context.Context) context.Context {
	if e.runCtx != nil {
		return e.runCtx
	}
	return ctx
}

// runBatch runs the shared specs in task sandboxes, re-running the probes
// a hung probe kept from running.
func (e *Engine) runBatch(ctx context.Context, specs []probes.Spec) map[string]batchResult {
	out := make(map[string]batchResult, len(specs))
	remaining := specs
	for run := 1; len(remaining) > 0; run++ {
		name := "shared"
		if run > 1 {
			name = fmt.Sprintf("shared-%d", run)
		}
		reports, token, sb, err := e.runTask(ctx, name, remaining, "", "")
		if err != nil {
			for _, s := range remaining {
				out[s.ID] = batchResult{err: err}
			}
			return out
		}
		var next []probes.Spec
		hung := ""
		for _, s := range remaining {
			r := reports[s.ID]
			switch {
			case r.notRun:
				next = append(next, s)
			case r.hung:
				hung = s.ID
				fallthrough
			default:
				out[s.ID] = batchResult{report: r, token: token, sb: sb}
			}
		}
		if hung != "" {
			msg := fmt.Sprintf("probe %s hung the shared batch (sandbox %s), which was cut at its own budget", hung, name)
			switch {
			case len(next) == 0:
			case run < maxBatchRuns:
				msg += fmt.Sprintf("; the %d probes after it run again in a fresh sandbox", len(next))
			default:
				msg += fmt.Sprintf("; the %d probes after it were not run (%d batches already cut)", len(next), run)
			}
			e.harnessError(fmt.Errorf("%s", msg))
		}
		if len(next) > 0 && run >= maxBatchRuns {
			d := fmt.Sprintf("not run: the shared batch was cut %d times by probes that hung (the last, %s)", run, hung)
			for _, s := range next {
				out[s.ID] = batchResult{report: selfReport{Outcome: probes.NotTested, Detail: d}, token: token, sb: sb}
			}
			next = nil
		}
		remaining = next
	}
	return out
}

// cutReports reads the output of a batch cut at its budget: the probes
// that reported keep their results; the first that did not is the one that
// hung; those after it never ran (notRun).
func cutReports(ids []string, out runners.ExitResult, budget time.Duration) map[string]selfReport {
	done := map[string]selfReport{}
	complete := out.Stdout
	if i := bytes.LastIndexByte(complete, '\n'); i >= 0 {
		complete = complete[:i+1]
	} else {
		complete = nil
	}
	if rs, err := probes.ParseResults(bytes.NewReader(complete)); err == nil && !out.Truncated {
		want := map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
		for _, r := range rs {
			if !want[r.Probe] {
				done = map[string]selfReport{} // output for a probe not asked: trust none of it
				break
			}
			done[r.Probe] = selfFrom(r)
		}
	}
	reports := make(map[string]selfReport, len(ids))
	hung := ""
	for _, id := range ids {
		if r, ok := done[id]; ok && hung == "" {
			reports[id] = r
			continue
		}
		if hung == "" {
			hung = id
			d := fmt.Sprintf("probe hung: its task was cut at its budget of %s (the sum of its probes' timeouts) with this probe unfinished", budget)
			reports[id] = selfReport{Outcome: probes.Inconclusive, Detail: d, hung: true,
				Items: []evidence.Item{{Source: evidence.SourceProbe, Kind: "timeout", Summary: d}}}
			continue
		}
		reports[id] = selfReport{Outcome: probes.NotTested, notRun: true,
			Detail: "not run: probe " + hung + " hung the shared batch before it"}
	}
	return reports
}

// sharedSpecs are the selected probes the batch holds: only what Probe
// carries out (a probe this runner cannot test, of another platform, or
// whose limit is above the profile's maximum never runs in the batch).
func (e *Engine) sharedSpecs() []probes.Spec {
	var shared []probes.Spec
	for _, s := range e.cfg.Selected {
		// Only what Probe carries out: a probe this runner cannot test, or
		// of another platform, never runs in the batch either.
		if s.Sandbox != probes.Shared || !e.runnable(s) {
			continue
		}
		if _, over := e.limitAboveMax(s); over {
			continue
		}
		shared = append(shared, s)
	}
	return shared
}
