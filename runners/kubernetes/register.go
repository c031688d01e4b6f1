package kubernetes

import (
	"context"
	"fmt"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The kubernetes runner registers itself under the target's
// `runner: kubernetes`; importing this package is what builds it in.
func init() { runners.Register("kubernetes", Open) }

// Open is the kubernetes backend's runners.OpenFunc: it reads the
// kubeconfig, the pod template and the namespace objects, checks that the
// API server answers and that the kubeconfig's user may do what a run does.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	if tg.Kubernetes == nil {
		return nil, fmt.Errorf("target %s has no kubernetes section", tg.Path)
	}
	if len(tg.Kubernetes.Pools) > 1 {
		return nil, fmt.Errorf("target %s lists %d pools: run it as a fleet (each pool is a run of its own)", tg.Path, len(tg.Kubernetes.Pools))
	}
	r, err := New(ctx, tg, env.Logger)
	if err != nil {
		return nil, err
	}
	if err := r.withRunEnv(env); err != nil {
		return nil, fmt.Errorf("target %s: %w", tg.Path, err)
	}
	return r, nil
}
