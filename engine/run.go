package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/reports"
)

// DefaultFormats are the reports a run writes unless told otherwise.
var DefaultFormats = []string{"json", "junit", "markdown", "sarif", "html"}

// ErrHarness marks runs in which the harness could not do its job.
var ErrHarness = errors.New("harness error")

// Outcome is what a finished run leaves: the graded record and where the
// reports went.
type Outcome struct {
	Record  *evidence.Record
	Reports []string
	// HarnessErrors are failures of the harness itself (exit code 2).
	HarnessErrors []string
}

// Progress is told of each result as its probe finishes: done of total
// probes have results, elapsed since the run began.
type Progress func(done, total int, res evidence.Result, elapsed time.Duration)

// Run is one way through: plan (select the probes), start (the run's folder,
// canaries, network and runner), probe (each selected probe in the
// sandboxes its placement asks for), observe (host evidence joined to each
// result), grade (the release policy) and report. The returned error is a
// harness failure before or after the probes ran; a probe's own harness
// trouble is in Outcome.HarnessErrors.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	sel, err := Select(cfg.Probes, cfg.LabelFilter)
	if err != nil {
		return nil, err
	}
	if cfg.OutDir, err = filepath.Abs(cfg.OutDir); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	cfg.Selected = sel
	e, err := New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up the run: %w", err)
	}
	e.probeAll(ctx, sel)
	return e.Conclude(context.WithoutCancel(ctx))
}

// probeAll carries out the selected probes, each bounded by its own
// timeout, until ctx ends.
func (e *Engine) probeAll(ctx context.Context, sel []probes.Spec) {
	for i, spec := range sel {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, SpecTimeout(spec))
		res := e.Probe(pctx, spec)
		cancel()
		if e.cfg.Progress != nil {
			e.cfg.Progress(i+1, len(sel), res, time.Since(e.started))
		}
	}
}

// Conclude closes the engine, grades the record with the release policy and
// writes the reports. The verdict comes from Rego, never from Go.
func (e *Engine) Conclude(ctx context.Context) (*Outcome, error) {
	defer e.CloseStream()
	rec := e.Finish(ctx)
	o := &Outcome{Record: rec, HarnessErrors: rec.Errors}
	rec.Tool.PolicyVersion = e.grader.Version()
	v, err := e.grader.Grade(ctx, rec)
	if err != nil {
		return o, fmt.Errorf("grading: %w", err)
	}
	rec.Verdict = v
	e.Emit("verdict", v)
	formats := e.cfg.Formats
	if len(formats) == 0 {
		formats = DefaultFormats
	}
	if o.Reports, err = reports.WriteAll(e.cfg.OutDir, rec, formats); err != nil {
		return o, fmt.Errorf("writing reports: %w", err)
	}
	return o, nil
}

// SpecTimeout bounds one probe: its own timeout, plus its sandbox starts.
func SpecTimeout(s probes.Spec) time.Duration {
	starts := map[probes.Placement]int{probes.Shared: 1, probes.Own: 1, probes.Sequence: 2, probes.Pair: 2}[s.Sandbox]
	return s.Timeout.D() + time.Duration(starts)*90*time.Second
}
