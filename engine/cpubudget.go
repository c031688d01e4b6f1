package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The target's CPU time budget (docker.cpu_time) is a platform watchdog:
// RLIMIT_CPU cannot be it, since runsc does not apply rlimits to the
// workload's CPU (the sentry's host threads run it). So the harness plays
// the watchdog from outside: it reads the sandbox cgroup's CPU accounting,
// which counts the sentry under gVisor and the processes under runc, and
// kills the sandbox once the budget is spent. What it did is host evidence;
// the probe inside has no say.

// Bounds of one watch.
const (
	cpuWatchEvery = 50 * time.Millisecond
	cpuWatchMax   = 15 * time.Minute
	cpuKillWithin = 10 * time.Second
)

// cpuWatch is the watchdog on one sandbox.
type cpuWatch struct {
	budget time.Duration
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	used    time.Duration // the last reading
	readErr error         // the last reading's error
	killed  bool
	killErr error
}

// watchCPU starts the watchdog on a sandbox that runs the one task of a
// probe that measures the budget (host evidence cpu-budget), when the target
// declares a budget and the runner can meter the sandbox. Only there: on the
// other probes' sandboxes the watchdog would stand in for their own
// controls (a bomb killed at 3 s of CPU before the pids limit or nproc
// stops it would hide a missing limit), and a sandbox holding many tasks
// (the shared batch) is not held to one task's budget.
func (e *Engine) watchCPU(s *sandbox, spec probes.Spec) {
	budget := e.target.CPUBudget()
	m, ok := s.sb.(runners.CPUMeter)
	if budget <= 0 || !ok || !slices.Contains(spec.Host, "cpu-budget") {
		return
	}
	w := &cpuWatch{budget: budget, stop: make(chan struct{}), done: make(chan struct{})}
	s.cpu = w
	go w.run(m)
}

func (w *cpuWatch) run(m runners.CPUMeter) {
	defer close(w.done)
	t := time.NewTicker(cpuWatchEvery)
	defer t.Stop()
	limit := time.After(cpuWatchMax)
	for {
		select {
		case <-w.stop:
			return
		case <-limit:
			return
		case <-t.C:
		}
		used, err := m.CPUUsed()
		w.mu.Lock()
		w.readErr = err
		if err == nil {
			w.used = used
		}
		w.mu.Unlock()
		if err != nil || used <= w.budget {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cpuKillWithin)
		kerr := m.Kill(ctx)
		cancel()
		w.mu.Lock()
		w.killed, w.killErr = kerr == nil, kerr
		w.mu.Unlock()
		return
	}
}

// end stops the watch (safe to call more than once, and on nil) and
// returns its final state.
func (w *cpuWatch) end() (killed bool, used time.Duration, readErr, killErr error) {
	if w == nil {
		return false, 0, nil, nil
	}
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.killed, w.used, w.readErr, w.killErr
}

// cpuBudgetEvidence is the host's account of the watchdog on the probe's
// sandbox: killed at the budget is blocked (a stop that settles a probe
// that could not report); past the budget and not killed is escaped.
func (e *Engine) cpuBudgetEvidence(s *sandbox) evidence.Item {
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: "cpu-budget"}
	budget := e.target.CPUBudget()
	if budget <= 0 {
		it.Summary = "the target declares no CPU time budget (docker.cpu_time)"
		return it
	}
	if s.cpu == nil {
		it.Summary = fmt.Sprintf("the target's CPU budget is %s, but this sandbox was not watched (it holds several tasks, or the runner cannot meter it)", budget)
		return it
	}
	killed, used, readErr, killErr := s.cpu.end()
	it.Data = map[string]string{"budget": budget.String(), "used": used.Round(time.Millisecond).String()}
	switch {
	case killed:
		it.Kind, it.Indicates = "cpu-budget-killed", probes.Blocked
		it.Summary = fmt.Sprintf("the harness, as the platform's watchdog, killed the sandbox once its cgroup had used %s of CPU (budget %s)", used.Round(time.Millisecond), budget)
	case killErr != nil:
		it.Summary = fmt.Sprintf("the sandbox used %s of CPU, past its budget of %s, and the watchdog could not kill it: %v", used.Round(time.Millisecond), budget, killErr)
		it.Indicates = probes.Escaped
	case used > budget:
		it.Summary = fmt.Sprintf("the sandbox used %s of CPU, past its budget of %s, and was not stopped", used.Round(time.Millisecond), budget)
		it.Indicates = probes.Escaped
	case readErr != nil && used == 0:
		it.Summary = "the watchdog could not read the sandbox's CPU accounting: " + readErr.Error()
	default:
		it.Summary = fmt.Sprintf("the sandbox used %s of CPU, within its budget of %s", used.Round(time.Millisecond), budget)
	}
	return it
}
