package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// pairBatch holds the two phases of every selected pair probe: what each
// probe's plant task reported, and what its check task (the result) found.
type pairBatch struct {
	plant, check map[string]selfReport
	token        string   // the check task's token
	sb           *sandbox // the sandbox the check task ran in
	err          error
}

// runPair runs, once, the plant phase and then the check phase of every
// selected pair probe, placed as the target launches tasks: exec'd one after
// the other into one box (what the first task leaves, the second meets), or
// each phase the first process of a fresh box. Later calls take their result
// from that run; the plant phase's evidence is kept, marked plant:.
func (e *Engine) runPair(ctx context.Context, spec probes.Spec, res *evidence.Result) error {
	e.pairOnce.Do(func() {
		var specs []probes.Spec
		for _, s := range e.cfg.Selected {
			if s.Sandbox == probes.Pair {
				specs = append(specs, s)
			}
		}
		if len(specs) == 0 {
			specs = []probes.Spec{spec}
		}
		e.pair = e.runPairs(ctx, specs)
	})
	if e.pair.err != nil {
		return e.pair.err
	}
	r, ok := e.pair.check[spec.ID]
	if !ok {
		return fmt.Errorf("probe %s was not in the pair batch", spec.ID)
	}
	e.fill(spec, res, r, e.pair.token, e.pair.sb)
	for _, it := range e.pair.plant[spec.ID].Items {
		it.Kind = "plant:" + it.Kind
		res.Evidence = append(res.Evidence, it)
	}
	return nil
}

// runPairs carries out both phases for the given probes.
func (e *Engine) runPairs(ctx context.Context, specs []probes.Spec) pairBatch {
	marker := newToken(e.rec.RunID)
	if e.taskMode() {
		plant, _, _, err := e.runTask(ctx, "pair-plant", specs, marker, "plant")
		if err != nil {
			return pairBatch{err: fmt.Errorf("plant task: %w", err)}
		}
		check, token, sb, err := e.runTask(ctx, "pair-check", specs, marker, "check")
		if err != nil {
			return pairBatch{err: fmt.Errorf("check task: %w", err)}
		}
		return pairBatch{plant: plant, check: check, token: token, sb: sb}
	}
	sb, err := e.start(ctx, "pair", nil)
	if err != nil {
		return pairBatch{err: err}
	}
	defer e.closeSandbox(sb)
	plant, _, err := e.execBatch(ctx, sb, specs, marker, "plant")
	if err != nil {
		return pairBatch{err: fmt.Errorf("plant task: %w", err)}
	}
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
	out, err := s.sb.Exec(ectx, argv)
	if err != nil {
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
