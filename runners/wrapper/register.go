package wrapper

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

// The wrapper runner registers itself, and its section, under the
// target's `runner: wrapper`.
func init() {
	runners.RegisterPlugin(runners.Plugin{Name: "wrapper", Decode: Decode, Open: Open, Config: (*Config)(nil), Schema: schema, Sweep: Sweep})
}

var (
	_ runners.HarnessNetworkUser = (*Runner)(nil)
	_ netharness.Joiner          = (*Runner)(nil)
	_ runners.ParamsFiller       = (*Runner)(nil)
)

// netNamespace is the sandbox's network namespace.
type netNamespace = netharness.Namespace

// Open is the wrapper backend's runners.OpenFunc. A wrapper shows the box
// the host's file system as it decides, so the run's mounts, tmpfs and
// devices cannot be put anywhere: a run that prepared some is refused.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	sec, ok := tg.Section.(*Config)
	if !ok {
		return nil, fmt.Errorf("target %s has no wrapper section", tg.Path)
	}
	if len(env.Mounts) > 0 || len(env.Tmpfs) > 0 || len(env.Devices) > 0 {
		return nil, errors.New("the wrapper runner puts no mounts, tmpfs or devices into a wrapper's sandbox")
	}
	cfg := *sec
	if env.Env != nil {
		cfg.Env = env.Env
	}
	return New(cfg, filepath.Dir(tg.Path), WithLogger(env.Logger))
}

// UsesHarnessNetwork reports whether the target's network is the harness's
// (harness, or proxy: the wrapper's own proxy on the harness network).
func (r *Runner) UsesHarnessNetwork() bool {
	return r.cfg.Network == "harness" || r.cfg.Network == "proxy"
}

// FillParams implements runners.ParamsFiller: with network proxy the
// probes are told that the wrapper filters through a proxy of its own,
// which it names to the box, and which proxies the target declares it
// announces (the only ones the probes dial through).
func (r *Runner) FillParams(p *probes.Params) {
	p.WrapperProxy = r.cfg.Network == "proxy"
	if !p.WrapperProxy {
		return
	}
	for _, u := range r.cfg.Proxies {
		if ep, err := probes.WrapperProxyEndpoint(u); err == nil {
			p.WrapperProxies = append(p.WrapperProxies, ep)
		}
	}
}

// openNetwork makes the sandbox's network namespace: only loopback for
// none; on the harness network for harness and proxy.
func (r *Runner) openNetwork(ctx context.Context, network, owner string) (*netharness.Namespace, error) {
	var docker client.NetworkAPIClient
	joined := r.JoinedNetwork()
	mode := r.cfg.Network
	if mode == "proxy" {
		mode = "harness"
	}
	if mode == "harness" && joined == nil {
		var err error
		if docker, err = r.NetworkAPI(ctx); err != nil {
			return nil, err
		}
	}
	return process.OpenNetwork(ctx, mode, network, owner, joined, docker)
}
