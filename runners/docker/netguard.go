package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// ErrNetworkProbeRefused is returned by Exec (and Start, for a task) for a
// network probe in a sandbox whose network the harness does not confine
// (host, Docker's bridge, any network not marked internal): its traffic
// could leave the harness's own addresses. The engine should not ask
// (see NetworkProbe); this is the runner's own guard.
var ErrNetworkProbeRefused = errors.New("network probe refused: the sandbox's network is not confined to the harness's addresses")

// NetworkProbe reports whether a probe sends traffic off the sandbox: the
// metadata, egress and workload categories and any probe labelled
// needs-network. On a target whose network is unconfined
// (targets.Target.SharesHostNetwork) such probes are not run; they are
// not-tested, and the runtime's view grades the network.
func NetworkProbe(s probes.Spec) bool {
	switch s.Category {
	case "metadata", "egress", "workload":
		return true
	}
	return slices.Contains(s.Labels, "needs-network")
}

// unconfinedNetwork reports whether a network mode may let the sandbox reach
// beyond the harness's addresses: anything but none, the harness's own
// network and a Docker network marked internal (no route off the host). A
// network that cannot be inspected counts as unconfined.
func unconfinedNetwork(ctx context.Context, cli client.APIClient, mode, harness string) bool {
	switch {
	case mode == "none", harness != "" && mode == harness:
		return false
	case slices.Contains(targets.UnconfinedNetworks, mode):
		return true
	}
	res, err := cli.NetworkInspect(ctx, mode, client.NetworkInspectOptions{})
	return err != nil || !res.Network.Internal
}

// networkProbes are the catalog's network probe IDs.
var networkProbes = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range probes.Catalog() {
		if NetworkProbe(s) {
			m[s.ID] = true
		}
	}
	return m
}()

// checkNetworkArgv refuses an argv that names a network probe, as a word
// of its own or in its parameters' probes list (probes.Params.Probes). A
// --params that does not parse is refused too: what it would run is
// unknown.
func checkNetworkArgv(argv []string) error {
	for _, a := range argv {
		if networkProbes[a] {
			return fmt.Errorf("%w: %s", ErrNetworkProbeRefused, a)
		}
	}
	p, ok, err := probes.ArgvParams(argv)
	if !ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNetworkProbeRefused, err)
	}
	for _, id := range p.Probes {
		if networkProbes[id] {
			return fmt.Errorf("%w: %s", ErrNetworkProbeRefused, id)
		}
	}
	return nil
}

// NetworkConfined reports whether a target's network setting keeps a
// sandbox's traffic on the harness's addresses (none, harness, or an internal
// Docker network), as the runner's guard judges it. The engine marks network
// probes not-tested where it does not, instead of asking the runner to run
// them.
func NetworkConfined(ctx context.Context, network string) (bool, error) {
	if network == "none" || network == "harness" {
		return true, nil
	}
	c, err := engine(ctx)
	if err != nil {
		return false, err
	}
	return !unconfinedNetwork(ctx, c, network, ""), nil
}
