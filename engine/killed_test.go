package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// killingRunner's sandboxes die under their first command, the platform
// saying it killed them at their memory limit; later sandboxes answer
// every probe blocked.
type killingRunner struct {
	mu      sync.Mutex
	started int
	closed  int
}

func (*killingRunner) Name() string                       { return "killing" }
func (*killingRunner) Capabilities() runners.Capabilities { return runners.Capabilities{} }
func (r *killingRunner) Start(context.Context, runners.SandboxSpec) (runners.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
	return &killingBox{r: r, n: r.started}, nil
}

type killingBox struct {
	r    *killingRunner
	n    int
	runs int
}

func (b *killingBox) ID() string                                   { return fmt.Sprintf("box-%d", b.n) }
func (b *killingBox) CopyIn(context.Context, string, string) error { return nil }
func (b *killingBox) Close(context.Context) error {
	b.r.mu.Lock()
	b.r.closed++
	b.r.mu.Unlock()
	return nil
}
func (b *killingBox) Exec(_ context.Context, argv []string) (runners.ExitResult, error) {
	b.runs++
	if b.n == 1 {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("running probe: %w", &runners.KilledError{Account: "Failed: OOMKilled", OOM: true})
	}
	p, ok, err := probes.ArgvParams(argv)
	if err != nil || !ok || len(p.Probes) == 0 {
		return runners.ExitResult{ExitCode: 2}, fmt.Errorf("no probe list in %q (%v)", argv, err)
	}
	var out []byte
	for _, id := range p.Probes {
		line, _ := json.Marshal(probes.Result{Probe: id, Outcome: probes.Blocked, Detail: "refused"})
		out = append(append(out, line...), '\n')
	}
	return runners.ExitResult{Stdout: out}, nil
}

// A sandbox the platform OOM-kills under a probe settles that probe as
// contained (runtime evidence oom-killed, graded blocked), is no harness
// error, and the next shared probe gets a fresh sandbox.
func TestPlatformKillIsContained(t *testing.T) {
	var shared []probes.Spec
	for _, s := range probes.Catalog() {
		if s.Sandbox == probes.Shared && len(s.Requires()) == 0 && len(s.Runners) == 0 && !s.Informational && len(s.Host) == 0 {
			shared = append(shared, s)
		}
		if len(shared) == 2 {
			break
		}
	}
	if len(shared) < 2 {
		t.Fatal("no two shared probes that need nothing")
	}
	g, err := policies.New()
	if err != nil {
		t.Fatal(err)
	}
	r := &killingRunner{}
	e := &Engine{log: slog.New(slog.DiscardHandler), runner: r, grader: g, honey: newHoney("run"), creds: &creds{},
		target: &targets.Target{Name: "t", Runner: "killing", Profile: "no-network-transform"},
		rec:    &evidence.Record{Schema: evidence.Schema, RunID: "20261201t000000-00000000", Target: evidence.Target{Name: "t", Profile: "no-network-transform"}}}
	first := e.Probe(context.Background(), shared[0])
	second := e.Probe(context.Background(), shared[1])
	e.Close(context.Background())
	if errs := e.HarnessErrors(); len(errs) > 0 {
		t.Errorf("harness errors %v", errs)
	}
	if eff, err := e.Effective(context.Background(), first); err != nil || eff != probes.Blocked {
		t.Errorf("%s: effective %s (%v), want blocked: %+v", first.Probe, eff, err, first)
	}
	found := false
	for _, it := range first.Evidence {
		found = found || (it.Source == evidence.SourceRuntime && it.Kind == "oom-killed" && it.Indicates == probes.Blocked)
	}
	if !found {
		t.Errorf("%s: no oom-killed runtime evidence: %+v", first.Probe, first.Evidence)
	}
	if second.Outcome != probes.Blocked || second.Sandbox != "box-2" {
		t.Errorf("%s: %s in %s, want blocked in a fresh sandbox box-2", second.Probe, second.Outcome, second.Sandbox)
	}
	if r.started != 2 || r.closed != 2 {
		t.Errorf("started %d sandboxes, closed %d; want 2 and 2", r.started, r.closed)
	}
}
