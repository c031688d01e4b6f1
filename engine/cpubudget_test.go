package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// meteredBox is a sandbox whose CPU use grows by step at every reading.
type meteredBox struct {
	mu     sync.Mutex
	used   time.Duration
	step   time.Duration
	killed bool
}

func (m *meteredBox) ID() string                                   { return "box" }
func (m *meteredBox) CopyIn(context.Context, string, string) error { return nil }
func (m *meteredBox) Exec(context.Context, []string) (runners.ExitResult, error) {
	return runners.ExitResult{}, nil
}
func (m *meteredBox) Close(context.Context) error { return nil }
func (m *meteredBox) CPUUsed() (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.killed {
		m.used += m.step
	}
	return m.used, nil
}
func (m *meteredBox) Kill(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killed = true
	return nil
}

// The watchdog kills a sandbox that spends its budget and says so; one
// that stays within it, or a target without a budget, settles nothing.
func TestCPUBudgetWatchdog(t *testing.T) {
	e := &Engine{target: &targets.Target{Docker: &targets.Docker{CPUTime: "300ms"}}}
	measured := probes.Spec{ID: "resources.cpu-deadline", Host: []string{"cpu-budget"}}
	hog := &meteredBox{step: 100 * time.Millisecond}
	s := &sandbox{sb: hog}
	e.watchCPU(s, measured)
	deadline := time.Now().Add(5 * time.Second)
	for {
		hog.mu.Lock()
		k := hog.killed
		hog.mu.Unlock()
		if k || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if it := e.cpuBudgetEvidence(s); it.Kind != "cpu-budget-killed" || it.Indicates != probes.Blocked {
		t.Errorf("a hog: %+v, want killed at the budget (blocked)", it)
	}

	idle := &sandbox{sb: &meteredBox{}}
	e.watchCPU(idle, measured)
	time.Sleep(3 * cpuWatchEvery)
	if it := e.cpuBudgetEvidence(idle); it.Kind != "cpu-budget" || it.Indicates != "" {
		t.Errorf("an idle box: %+v, want no indication", it)
	}

	other := &sandbox{sb: &meteredBox{step: time.Second}}
	e.watchCPU(other, probes.Spec{ID: "resources.fork-bomb"})
	if other.cpu != nil {
		t.Error("a probe that does not measure the budget got a watchdog")
	}

	none := &Engine{target: &targets.Target{Docker: &targets.Docker{}}}
	s = &sandbox{sb: &meteredBox{step: time.Second}}
	none.watchCPU(s, measured)
	if s.cpu != nil {
		t.Error("a target without a budget got a watchdog")
	}
	if it := none.cpuBudgetEvidence(s); it.Indicates != "" {
		t.Errorf("no budget: %+v", it)
	}
}
