package netharness

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/moby/moby/client"
)

// Close undoes Create in reverse: it stops the canary, removes the metadata
// address and the iptables rules, removes the Docker network and releases
// the host lock. Containers still attached are disconnected by force (remove
// the sandboxes first; a sandbox that outlives the harness is the runner's
// teardown failure, not the network's). It carries on past failures and
// returns them all. Give it a live context; calling it twice is safe.
func (n *Network) Close(ctx context.Context) error {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	if err := n.stopCanaries(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stopping canaries: %w", err))
	}
	if n.addrDone {
		if err := delHostAddrs(n.bridge, hostAddrs()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.teardownIPv6(); err != nil {
		errs = append(errs, err)
	}
	for _, r := range slices.Backward(n.rules) {
		if err := deleteRule(n.ipt, r); err != nil {
			errs = append(errs, err)
		}
	}
	if n.id != "" {
		if err := removeNetwork(ctx, n.docker, n.id); err != nil {
			errs = append(errs, fmt.Errorf("removing docker network %s: %w", n.name, err))
		}
	}
	if err := n.lock.release(); err != nil {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if err != nil {
		n.log.Warn("harness network teardown incomplete", "network", n.name, "err", err)
	} else if n.id != "" {
		n.log.Info("harness network removed", "network", n.name)
	}
	return err
}

// Leftovers lists what of the network still exists on the host: the Docker
// network, the bridge, the metadata or outside addresses on any link,
// iptables rules naming the bridge, a listener on any harness address. After Close it
// must be empty; it is the teardown evidence for the run record.
func (n *Network) Leftovers(ctx context.Context) ([]string, error) {
	var out []string
	var errs []error
	if n.id != "" {
		nets, err := n.docker.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("id", n.id)})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing docker networks: %w", err))
		}
		for _, x := range nets.Items {
			if x.ID == n.id {
				out = append(out, "docker network "+n.name)
			}
		}
	}
	if n.bridge != "" {
		ok, err := linkExists(n.bridge)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			out = append(out, "bridge "+n.bridge)
		}
		rules, err := harnessRules(n.ipt, n.bridge)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range rules {
			out = append(out, "iptables rule "+r.String())
		}
	}
	held, err := linksHolding(hostAddrs())
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, held...)
	left6, err := n.leftovers6()
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, left6...)
	owned := hostAddrs()
	if n.plan.Gateway.IsValid() {
		owned = append(owned, n.plan.Gateway)
	}
	if n.neighbourLink != "" {
		ok, err := linkExists(n.neighbourLink)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			out = append(out, "neighbour link "+n.neighbourLink)
		}
	}
	listeners, err := harnessListeners(owned)
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, listeners...)
	return out, errors.Join(errs...)
}
