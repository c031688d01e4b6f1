package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/reports"
	"github.com/sandcheck/sandcheck/runners"
)

// DefaultFormats are the reports a run writes unless told otherwise: every
// format reports knows.
var DefaultFormats = reports.Formats()

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
	if err := CheckFormats(cfg.Formats); err != nil {
		return nil, err
	}
	cfg.Selected = sel
	e, err := New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up the run: %w", err)
	}
	// The limit probes' timeouts grow with their bounds (limits.go).
	e.cfg.Selected = e.fitLimits(e.cfg.Selected)
	e.runCtx = ctx
	e.probeAll(ctx, e.fitLimits(sel))
	return e.Conclude(context.WithoutCancel(ctx))
}

// probeAll carries out the selected probes, each bounded by its own
// timeout, until ctx ends. With Parallel above 1 the probes that share the
// run's one sandbox go one after another in a lane of their own (as in a
// serial run, so they never meet in that sandbox), while the probes with
// sandboxes of their own (own, sequence, pair) run up to Parallel at once;
// the probes that push a limit the host measures run last and alone
// (runsAlone).
func (e *Engine) probeAll(ctx context.Context, sel []probes.Spec) {
	var (
		mu   sync.Mutex
		done int
	)
	one := func(ctx context.Context, spec probes.Spec) {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, e.specTimeout(spec))
		res := e.Probe(pctx, spec)
		cancel()
		mu.Lock()
		done++
		if e.cfg.Progress != nil {
			e.cfg.Progress(done, len(sel), res, time.Since(e.started))
		}
		mu.Unlock()
	}
	if e.cfg.Parallel <= 1 {
		for _, spec := range sel {
			one(ctx, spec)
		}
		return
	}
	var shared, alone []probes.Spec
	// The probes with sandboxes of their own, as units a lane carries out
	// one after another: a probe alone, or a whole batch of two-phase
	// probes (pair.go), which its first probe runs and the others read.
	var units [][]probes.Spec
	batch := map[string]int{}
	for _, spec := range sel {
		switch {
		case e.runsAlone(spec):
			alone = append(alone, spec)
		case spec.Sandbox == probes.Shared:
			shared = append(shared, spec)
		case spec.Sandbox == probes.Pair || spec.Sandbox == probes.Sequence:
			i, ok := batch[phaseKey(spec)]
			if !ok {
				i = len(units)
				batch[phaseKey(spec)] = i
				units = append(units, nil)
			}
			units[i] = append(units[i], spec)
		default:
			units = append(units, []probes.Spec{spec})
		}
	}
	// Last, one at a time with nothing beside them, the probes that drive
	// their sandbox to a limit the host measures.
	defer func() {
		for _, spec := range alone {
			// Alone means beside nothing of the run's own either: no
			// sandbox still starting ahead or being removed.
			e.ahead.wg.Wait()
			e.closing.Wait()
			one(ctx, spec)
		}
	}()
	// A probe measured against the CPU budget first (it takes at least
	// the budget), then the longest-bounded, so a slow unit never starts
	// last and holds the run alone at its end.
	slices.SortStableFunc(units, func(a, b []probes.Spec) int {
		if c := cmp.Compare(spendsBudget(b), spendsBudget(a)); c != 0 {
			return c
		}
		return cmp.Compare(unitBound(b), unitBound(a))
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, spec := range shared {
			one(ctx, spec)
		}
	}()
	// Up to Parallel units hold a lane at once. A unit gives its lane up
	// once its sandboxes have run and only their removal and the host's
	// look for what outlived them are left (freeLane), so the next unit
	// starts while it ends.
	lanes := make(chan struct{}, e.cfg.Parallel)
	for _, u := range units {
		lanes <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			free := sync.OnceFunc(func() { <-lanes })
			defer free()
			uctx := context.WithValue(ctx, laneKey{}, free)
			for _, spec := range u {
				one(uctx, spec)
			}
		}()
	}
	// Every unit is under way: the probes that run alone get their
	// sandboxes started now, so their part of the run starts none.
	e.startAhead(ctx, alone)
	wg.Wait()
}

// spendsBudget is 1 for a unit holding a probe measured against the CPU
// budget, else 0.
func spendsBudget(u []probes.Spec) int {
	for _, s := range u {
		if slices.Contains(s.Host, "cpu-budget") {
			return 1
		}
	}
	return 0
}

// laneKey is the context key of a unit's lane release (probeAll).
type laneKey struct{}

// freeLane gives up the lane the probe's unit holds, if any: its
// sandboxes have run, and only closing them is left.
func freeLane(ctx context.Context) {
	if free, ok := ctx.Value(laneKey{}).(func()); ok {
		free()
	}
}

// unitBound is how long a unit of probes may take: the sum of their
// timeouts, twice for a two-phase batch.
func unitBound(u []probes.Spec) time.Duration {
	var d time.Duration
	for _, s := range u {
		d += s.Timeout.D()
		if s.Sandbox == probes.Pair || s.Sandbox == probes.Sequence {
			d += s.Timeout.D()
		}
	}
	return d
}

// runsAlone reports whether a probe must run with no other probe beside
// it: one that drives its sandbox to a limit the host measures (the OOM
// killer at the memory or pids limit the target declares) within a
// deadline of its own, and
// one measured against the CPU budget on a runtime whose tasks keep CPU
// clocks of their own. Other sandboxes competing for the CPU change when,
// or whether, it gets there: under gVisor a busy CPU let
// resources.cpu-deadline burn its whole 4 s before the host's cgroup
// reached the 3 s budget. Where the task's clock is the host kernel's
// (runners.HostCPUClocker), its cgroup has always used at least as much
// CPU as the task, so the watchdog stops it first beside anything: such a
// probe runs with the others (and, bound longest, starts first).
func (e *Engine) runsAlone(s probes.Spec) bool {
	if s.Sandbox != probes.Own {
		return false
	}
	if slices.Contains(s.Host, "runtime:oom") {
		return e.limitDeclared(s)
	}
	if slices.Contains(s.Host, "cpu-budget") {
		c, ok := e.runner.(runners.HostCPUClocker)
		return !ok || !c.HostCPUClock()
	}
	return false
}

// limitDeclared reports whether the target declares the limit a probe
// drives its sandbox to (runtime:memory-limit, runtime:pids-limit; a pids
// probe also stops at the nproc ulimit). With none declared there is no
// limit for the host to see reached within a deadline: the probe goes to
// its own bound beside anything, and waiting to run it alone at the run's
// end only makes the run longer.
func (e *Engine) limitDeclared(s probes.Spec) bool {
	d := e.target.DeclaredLimits()
	switch {
	case slices.Contains(s.Host, "runtime:memory-limit"):
		return d.MemoryBytes > 0
	case slices.Contains(s.Host, "runtime:pids-limit"):
		return d.Pids > 0 || d.Nproc > 0
	}
	return true
}

// Conclude closes the engine, grades the record with the release policy and
// writes run.json and the reports. The verdict comes from Rego, never from
// Go. run.json is written whatever else failed (without a verdict when
// grading failed); any failure to write the evidence stream, run.json or a
// report is returned: the run's evidence is incomplete.
func (e *Engine) Conclude(ctx context.Context) (*Outcome, error) {
	rec := e.Finish(ctx)
	o := &Outcome{Record: rec, HarnessErrors: rec.Errors}
	e.grader.Stamp(&rec.Tool)
	var errs []error
	if v, err := e.grader.Grade(ctx, rec); err != nil {
		errs = append(errs, fmt.Errorf("grading: %w", err))
	} else {
		rec.Verdict = v
		e.Emit("verdict", v)
	}
	if err := e.CloseStream(); err != nil {
		errs = append(errs, fmt.Errorf("writing evidence: %w", err))
	}
	var err error
	if o.Reports, err = reports.WriteAll(e.cfg.OutDir, rec, withRecord(e.cfg.Formats)); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// withRecord is the formats to write, run.json first whatever was asked:
// the record is always kept.
func withRecord(formats []string) []string {
	if len(formats) == 0 {
		formats = DefaultFormats
	}
	out := []string{"json"}
	for _, f := range formats {
		if f != "json" {
			out = append(out, f)
		}
	}
	return out
}

// CheckFormats refuses report formats no writer knows, before a run starts.
func CheckFormats(formats []string) error {
	known := reports.Formats()
	for _, f := range formats {
		if !slices.Contains(known, f) {
			return fmt.Errorf("--format %q: unknown report format (known: %s)", f, strings.Join(known, ", "))
		}
	}
	return nil
}

// startAllowance is what a probe's deadline allows for each sandbox start.
const startAllowance = 90 * time.Second

// SpecTimeout bounds one probe: its own timeout, plus its sandbox starts.
func SpecTimeout(s probes.Spec) time.Duration { return SpecTimeoutWith(s, startAllowance) }

// SpecTimeoutWith is SpecTimeout with allow for each sandbox start.
func SpecTimeoutWith(s probes.Spec, allow time.Duration) time.Duration {
	starts := map[probes.Placement]int{probes.Shared: 1, probes.Own: 1, probes.Sequence: 2, probes.Pair: 2}[s.Sandbox]
	return s.Timeout.D() + time.Duration(starts)*allow
}

// specTimeout is SpecTimeout with the run's start allowance
// (Config.StartAllowance, for tests).
func (e *Engine) specTimeout(s probes.Spec) time.Duration {
	if a := e.cfg.StartAllowance; a > 0 {
		return SpecTimeoutWith(s, a)
	}
	return SpecTimeout(s)
}
