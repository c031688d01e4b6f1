package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// pairBatch holds the two phases of every selected pair probe: what each
// probe's plant task reported, and what its check task (the result) found.
type pairBatch struct {
	plant, check map[string]selfReport
	token        string   // the check task's token
	sb           *sandbox // the sandbox the check task ran in
	err          error
}

// phaseBatch is one batch of two-phase probes, run once.
type phaseBatch struct {
	once sync.Once
	res  pairBatch
}

// phaseKey names the batch a two-phase probe runs in. Pair probes meet
// what the task before them left, as the target hands out tasks: in one
// box (exec launch) or in a fresh box each (task launch). Sequence probes
// always look from a second box; under task launch that is what a pair
// batch does too, but they keep a batch of their own, so no probe's check
// meets another probe's plant under the same marker.
func phaseKey(spec probes.Spec) string {
	if spec.Sandbox == probes.Sequence {
		return "sequence"
	}
	return "pair"
}

// runPhased runs, once per batch, the plant phase and then the check
// phase of every selected probe of the batch spec belongs to (phaseKey).
// Later calls take their result from that run; the plant phase's evidence
// is kept, marked plant:.
func (e *Engine) runPhased(ctx context.Context, spec probes.Spec, res *evidence.Result) error {
	key := phaseKey(spec)
	e.mu.Lock()
	if e.phases == nil {
		e.phases = map[string]*phaseBatch{}
	}
	b := e.phases[key]
	if b == nil {
		b = &phaseBatch{}
		e.phases[key] = b
	}
	e.mu.Unlock()
	b.once.Do(func() {
		var specs []probes.Spec
		for _, s := range e.cfg.Selected {
			if (s.Sandbox == probes.Pair || s.Sandbox == probes.Sequence) && phaseKey(s) == key && e.runnable(s) {
				specs = append(specs, s)
			}
		}
		if len(specs) == 0 {
			specs = []probes.Spec{spec}
		}
		b.res = e.runPhases(ctx, key, specs)
	})
	if b.res.err != nil {
		return b.res.err
	}
	r, ok := b.res.check[spec.ID]
	if !ok {
		return fmt.Errorf("probe %s was not in the %s batch", spec.ID, key)
	}
	plant, planted := b.res.plant[spec.ID]
	r = gatedByPlant(r, plant, planted)
	e.fill(spec, res, r, b.res.token, b.res.sb)
	for _, it := range b.res.plant[spec.ID].Items {
		it.Kind = "plant:" + it.Kind
		res.Evidence = append(res.Evidence, it)
	}
	return nil
}

// gatedByPlant is a two-phase probe's result from its check report: a check
// that found nothing (blocked) after a plant phase that did not complete
// (no report, or an inconclusive one: cut at its budget, killed, a crash)
// is inconclusive, since nothing was left to be found. A check that found
// the marker keeps its result: the marker is this run's own.
func gatedByPlant(check, plant selfReport, planted bool) selfReport {
	if check.Outcome != probes.Blocked || (planted && plant.Outcome != probes.Inconclusive) {
		return check
	}
	why := "the plant task gave no report for it"
	if planted {
		why = "the plant task was inconclusive: " + truncate(plant.Detail, 200)
	}
	d := "the check found nothing, but " + why + ": nothing may have been left to find"
	out := check
	out.Outcome, out.Detail = probes.Inconclusive, d
	out.Items = append(slices.Clone(check.Items), evidence.Item{Source: evidence.SourceProbe, Kind: "plant-incomplete", Summary: d})
	return out
}

// runPhases carries out both phases for the given probes: each phase the
// first process of a fresh box (task launch), or exec'd into boxes that
// live on: one box for both phases of a pair batch, one box per phase of
// a sequence batch.
func (e *Engine) runPhases(ctx context.Context, key string, specs []probes.Spec) pairBatch {
	marker := newToken(e.rec.RunID)
	if e.taskMode() {
		plant, _, _, err := e.runTask(ctx, key+"-plant", specs, marker, "plant")
		if err != nil {
			return pairBatch{err: fmt.Errorf("plant task: %w", err)}
		}
		check, token, sb, err := e.runTask(ctx, key+"-check", specs, marker, "check")
		if err != nil {
			return pairBatch{err: fmt.Errorf("check task: %w", err)}
		}
		return pairBatch{plant: plant, check: check, token: token, sb: sb}
	}
	sb, err := e.start(ctx, key, nil)
	if err != nil {
		return pairBatch{err: err}
	}
	plant, _, err := e.execBatch(ctx, sb, specs, marker, "plant")
	if err != nil {
		e.closeSandbox(sb)
		return pairBatch{err: fmt.Errorf("plant task: %w", err)}
	}
	if key == "sequence" {
		e.closeSandbox(sb)
		if sb, err = e.start(ctx, key+"-check", nil); err != nil {
			return pairBatch{err: err}
		}
	}
	defer e.closeSandbox(sb)
	check, token, err := e.execBatch(ctx, sb, specs, marker, "check")
	if err != nil {
		return pairBatch{err: fmt.Errorf("check task: %w", err)}
	}
	return pairBatch{plant: plant, check: check, token: token, sb: sb}
}

// execBatch execs one probe invocation running all the given probes into a
// running sandbox and reads their results. A batch that overruns the sum of
// its probes' timeouts makes each of them inconclusive.
func (e *Engine) execBatch(ctx context.Context, s *sandbox, specs []probes.Spec, marker, phase string) (map[string]selfReport, string, error) {
	token := newToken(e.rec.RunID)
	ids := make([]string, len(specs))
	var budget time.Duration
	for i, sp := range specs {
		ids[i] = sp.ID
		budget += sp.Timeout.D()
	}
	budget = min(budget, 10*time.Minute) + 5*time.Second
	e.addProbes(s, ids...)
	ectx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	argv, err := probeArgv(e.probeParams(token, ids, marker, phase), ids)
	if err != nil {
		return nil, "", err
	}
	out, err := e.trace.exec(ectx, s, token, argv)
	if err != nil {
		if errors.Is(err, runners.ErrExecStuck) {
			return nil, "", fmt.Errorf("running probes: %w", err)
		}
		if ectx.Err() != nil && ctx.Err() == nil {
			reports := map[string]selfReport{}
			d := fmt.Sprintf("probes did not finish within %s", budget)
			for _, id := range ids {
				reports[id] = selfReport{Outcome: probes.Inconclusive, Detail: d,
					Items: []evidence.Item{{Source: evidence.SourceProbe, Kind: "timeout", Summary: d}}}
			}
			return reports, token, nil
		}
		return nil, "", fmt.Errorf("running probes: %w", err)
	}
	return interpretAll(ids, out), token, nil
}
