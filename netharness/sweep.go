package netharness

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/coreos/go-iptables/iptables"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
)

// Sweep removes what runs that died left behind: Docker networks labelled
// sandcheck.harness=1 (containers still attached are disconnected by force),
// iptables rules naming a harness bridge, and harness bridges Docker no
// longer knows. It first takes the host's harness lock, waiting until ctx
// ends, so it never touches the network of a live run: a live run holds the
// lock, a dead one cannot. It returns what it removed. Create sweeps by
// itself; call Sweep at startup or in tests to clean without creating.
func Sweep(ctx context.Context, docker client.NetworkAPIClient) ([]string, error) {
	return SweepNotify(ctx, docker, nil)
}

// SweepNotify is Sweep; when a live run holds the harness lock, onWait (if
// set) is told at once, once, with what holds it, so the caller can say why
// it waits.
func SweepNotify(ctx context.Context, docker client.NetworkAPIClient, onWait func(holder string)) ([]string, error) {
	if docker == nil {
		return nil, errors.New("sweeping harness networks: no docker client")
	}
	ipt, err := iptables.New()
	if err != nil {
		return nil, fmt.Errorf("finding iptables: %w", err)
	}
	lock, err := acquireLockNotify(ctx, DefaultLockPath, onWait)
	if err != nil {
		return nil, err
	}
	removed, err := sweepLocked(ctx, docker, ipt)
	return removed, errors.Join(err, lock.release())
}

// sweepLocked sweeps; the caller holds the harness lock. It carries on past
// failures and returns them all.
func sweepLocked(ctx context.Context, docker client.NetworkAPIClient, ipt *iptables.IPTables) ([]string, error) {
	var removed []string
	var errs []error
	nets, err := docker.NetworkList(ctx, client.NetworkListOptions{
		Filters: make(client.Filters).Add("label", LabelHarness+"=1"),
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing harness networks: %w", err))
	}
	for _, nw := range nets.Items {
		if err := removeNetwork(ctx, docker, nw.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing leftover network %s: %w", nw.Name, err))
			continue
		}
		removed = append(removed, "docker network "+nw.Name)
	}
	rules, err := harnessRules(ipt, "")
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range rules {
		if err := deleteRule(ipt, r); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "iptables rule "+r.String())
	}
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("listing links: %w", err))
	}
	bridgeLeft := err != nil
	for _, l := range links {
		name := l.Attrs().Name
		if !bridgePattern.MatchString(name) || l.Type() != "bridge" {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("removing leftover bridge %s: %w", name, err))
			bridgeLeft = true
			continue
		}
		removed = append(removed, "bridge "+name)
	}
	// The IPv6 fence goes after the bridges it fenced, and stays while
	// one of them may still be there.
	if !bridgeLeft {
		removed6, err := sweepRules6()
		if err != nil {
			errs = append(errs, err)
		}
		removed = append(removed, removed6...)
	}
	return removed, errors.Join(errs...)
}

// removeNetwork disconnects whatever is still attached, then removes the
// network. A network already gone is not an error.
func removeNetwork(ctx context.Context, docker client.NetworkAPIClient, id string) error {
	ins, err := docker.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspecting: %w", err)
	}
	for cid := range ins.Network.Containers {
		if _, err := docker.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: cid, Force: true}); err != nil {
			return fmt.Errorf("disconnecting container %.12s: %w", cid, err)
		}
	}
	if _, err := docker.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}
