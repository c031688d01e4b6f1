package engine

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// A sandbox started ahead waits, idle, for the probe it was started for:
// in task launch mode its first process is the probe binary held at its
// go-ahead, in exec mode the probe binary holding the box open. The
// probes that must run alone (runsAlone) get theirs started while the
// others still run, so the part of the run where one probe holds the
// machine pays no sandbox start; nothing inside a box started ahead runs
// before its probe's turn.

// aheadMaxAge is how long a sandbox started ahead may wait before it is
// thrown away and its probe gets a fresh one: a task waits at most 60 s
// for its go-ahead (sandcheck-probe's goAheadWait).
const aheadMaxAge = 30 * time.Second

// ahead is one sandbox started ahead of its probe.
type ahead struct {
	done  chan struct{} // closed once the start returned
	token string        // the task's token (task mode)
	sb    *sandbox
	err   error
	at    time.Time // when the start returned
}

// aheads holds the sandboxes started ahead, by sandbox name.
type aheads struct {
	mu sync.Mutex
	m  map[string]*ahead
	wg sync.WaitGroup
}

// startAhead starts, one after another in the background, the sandboxes
// of the given own-sandbox probes (one task each), in the order they will
// run.
func (e *Engine) startAhead(ctx context.Context, specs []probes.Spec) {
	var list []*ahead
	var names []string
	var run []probes.Spec
	e.ahead.mu.Lock()
	if e.ahead.m == nil {
		e.ahead.m = map[string]*ahead{}
	}
	for _, s := range specs {
		if s.Sandbox != probes.Own || !e.runnable(s) {
			continue
		}
		if _, dup := e.ahead.m[s.ID]; dup {
			continue
		}
		a := &ahead{done: make(chan struct{})}
		e.ahead.m[s.ID] = a
		list, names, run = append(list, a), append(names, s.ID), append(run, s)
	}
	e.ahead.mu.Unlock()
	if len(list) == 0 {
		return
	}
	e.ahead.wg.Add(1)
	go func() {
		defer e.ahead.wg.Done()
		for i, a := range list {
			if e.taskMode() {
				a.token = newToken(e.rec.RunID)
				a.sb, a.err = e.startTask(ctx, names[i], []probes.Spec{run[i]}, a.token, "", "")
			} else {
				a.sb, a.err = e.start(ctx, names[i], nil)
			}
			a.at = time.Now()
			close(a.done)
		}
	}()
}

// takeAhead hands out the sandbox started ahead under name, waiting for
// its start to return, or nil when there is none. One that waited too
// long is closed and nil returned, so the probe starts afresh.
func (e *Engine) takeAhead(ctx context.Context, name string) *ahead {
	e.ahead.mu.Lock()
	a := e.ahead.m[name]
	delete(e.ahead.m, name)
	e.ahead.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		// The start goes on; Close removes what it leaves.
		e.ahead.mu.Lock()
		e.ahead.m["abandoned:"+name] = a
		e.ahead.mu.Unlock()
		return &ahead{err: ctx.Err()}
	}
	if a.err == nil && time.Since(a.at) > aheadMaxAge {
		e.log.Debug("a sandbox started ahead waited too long; starting afresh", "sandbox", name, "waited", time.Since(a.at))
		// Removed before the fresh start, which takes the same name.
		e.closeSandbox(a.sb)
		return nil
	}
	return a
}

// closeAheads removes every sandbox started ahead that no probe took (an
// interrupted run).
func (e *Engine) closeAheads() {
	e.ahead.wg.Wait()
	e.ahead.mu.Lock()
	left := e.ahead.m
	e.ahead.m = nil
	e.ahead.mu.Unlock()
	for name, a := range left {
		<-a.done
		if a.sb != nil {
			e.log.Debug("closing a sandbox started ahead that no probe took", "sandbox", strings.TrimPrefix(name, "abandoned:"))
			e.closeSandbox(a.sb)
		}
	}
}

// closeLater removes a sandbox in the background; Close waits for it.
func (e *Engine) closeLater(s *sandbox) {
	e.closing.Add(1)
	go func() {
		defer e.closing.Done()
		e.closeSandbox(s)
	}()
}

// closesQuietly reports whether nothing in the results of these probes
// depends on their sandbox being gone: no teardown evidence (looked for
// after close) and nothing from the tracer (whose account of a sandbox is
// complete once it stops watching it). Their sandbox is then removed in
// the background while the run goes on.
func closesQuietly(specs []probes.Spec) bool {
	for _, s := range specs {
		if tracedProbe(s) {
			return false
		}
		for _, h := range s.Host {
			if strings.HasPrefix(h, "teardown:") || h == "broker:replay" {
				return false
			}
		}
	}
	return true
}

// runnable reports whether Probe carries a probe out in a sandbox: it is
// of this target's platform and the runner has what it needs.
func (e *Engine) runnable(s probes.Spec) bool {
	return s.AppliesTo(e.target.Runner) && len(e.runner.Capabilities().Missing(s.Requires())) == 0
}
