package docker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// ErrNetworkProbeRefused is returned by Exec for a network probe in a sandbox
// whose network the harness does not confine (host or Docker's bridge): its
// traffic would leave the harness's own addresses. The engine should not ask
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

// unconfinedNetwork reports whether a network mode lets the sandbox reach
// beyond the harness's addresses.
func unconfinedNetwork(mode string) bool {
	return slices.Contains(targets.UnconfinedNetworks, mode)
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

// checkNetworkArgv refuses an argv that names a network probe.
func checkNetworkArgv(argv []string) error {
	for _, a := range argv {
		if networkProbes[a] {
			return fmt.Errorf("%w: %s", ErrNetworkProbeRefused, a)
		}
	}
	return nil
}
