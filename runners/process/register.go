package process

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The process runner registers itself, and its section, under the
// target's `runner: process`.
func init() {
	runners.RegisterPlugin(runners.Plugin{Name: "process", Decode: Decode, Open: Open, Config: (*Config)(nil), Schema: schema, Sweep: Sweep})
}

var (
	_ runners.HarnessNetworkUser = (*Runner)(nil)
	_ runners.HostPIDer          = (*Sandbox)(nil)
	_ netharness.Joiner          = (*Runner)(nil)
)

// Joined holds the harness network a runner was handed (netharness.Joiner).
// It is safe for concurrent use.
type Joined struct {
	mu sync.Mutex
	n  *netharness.Network
}

// Set records the network.
func (j *Joined) Set(n *netharness.Network) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n = n
}

// Get returns the network set, nil before.
func (j *Joined) Get() *netharness.Network {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// Open is the process backend's runners.OpenFunc. The process shares the
// host's file system, so the run's mounts, tmpfs and devices cannot be put
// anywhere: a run that prepared some is refused.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	sec, ok := tg.Section.(*Config)
	if !ok {
		return nil, fmt.Errorf("target %s has no process section", tg.Path)
	}
	if len(env.Mounts) > 0 || len(env.Tmpfs) > 0 || len(env.Devices) > 0 {
		return nil, errors.New("the process runner has no file system of its own: it cannot take mounts, tmpfs or devices")
	}
	cfg := *sec
	if env.Env != nil {
		cfg.Env = env.Env
	}
	return New(cfg, WithLogger(env.Logger))
}

// UsesHarnessNetwork reports whether the target's network is the harness's.
func (r *Runner) UsesHarnessNetwork() bool { return r.cfg.Network == "harness" }

// HostPID is the host PID of the sandbox's first process.
func (sb *Sandbox) HostPID(ctx context.Context) (int, error) {
	if sb.First.Exited() {
		return 0, fmt.Errorf("sandbox %s: its first process has ended", sb.SandboxID)
	}
	return sb.First.Pid(), nil
}

// Sweep is the process runner's runners.SweepFunc: it removes the sandboxes
// of dead runs under StateRoot, with their cgroups and what still runs in
// them (SweepSandboxes).
func Sweep(_ context.Context, only string) (removed, kept []string, err error) {
	return SweepSandboxes(StateRoot, idPrefix, only)
}
