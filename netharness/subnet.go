package netharness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"

	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The harness subnet is 169.254.N.0/24 with N in [subnetMin, subnetMax]:
// link-local, so it never collides with a routed network and is never
// forwarded anywhere even if a rule were missing.
const (
	subnetMin = 100
	subnetMax = 199
)

// metadataIP is the address every cloud metadata service answers on; the
// harness holds it on its bridge.
var metadataIP = netip.MustParseAddr("169.254.169.254")

// ecsIP is the ECS container credentials endpoint and alibabaIP the Alibaba
// Cloud metadata service; the harness holds both on its bridge too, with
// their own metadata canaries.
var (
	ecsIP     = netip.MustParseAddr("169.254.170.2")
	alibabaIP = netip.MustParseAddr("100.100.100.200")
)

// plan is the address layout of one harness network.
type plan struct {
	Subnet  netip.Prefix // 169.254.N.0/24
	IPRange netip.Prefix // 169.254.N.0/25: containers never get high addresses
	Gateway netip.Addr   // 169.254.N.1, the bridge's own address
}

func planFor(n int) plan {
	base := netip.AddrFrom4([4]byte{169, 254, byte(n), 0})
	return plan{
		Subnet:  netip.PrefixFrom(base, 24),
		IPRange: netip.PrefixFrom(base, 25),
		Gateway: base.Next(),
	}
}

// pickSubnet returns the first N, starting at start and wrapping, whose /24
// overlaps nothing in used and holds none of the harness's /32 addresses
// (169.254.169.254, 169.254.170.2).
func pickSubnet(used []netip.Prefix, start int) (plan, error) {
	span := subnetMax - subnetMin + 1
	for i := range span {
		p := planFor(subnetMin + (start-subnetMin+i+span)%span)
		if slices.ContainsFunc(hostAddrs(), p.Subnet.Contains) {
			continue
		}
		free := true
		for _, u := range used {
			if u.Overlaps(p.Subnet) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return plan{}, fmt.Errorf("choosing a subnet: every 169.254.%d-%d.0/24 overlaps a route or docker network", subnetMin, subnetMax)
}

// usedPrefixes lists what a new subnet must not overlap: every non-default
// route in every routing table, every interface address and every docker
// network's subnets.
func usedPrefixes(ctx context.Context, docker client.NetworkAPIClient) ([]netip.Prefix, error) {
	var used []netip.Prefix
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue // the default route overlaps everything and decides nothing
		}
		if p, ok := prefixOf(r.Dst); ok && p.Bits() > 0 {
			used = append(used, p)
		}
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			used = append(used, p)
		}
	}
	nets, err := docker.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing docker networks: %w", err)
	}
	for _, n := range nets.Items {
		for _, c := range n.IPAM.Config {
			if c.Subnet.IsValid() {
				used = append(used, c.Subnet.Masked())
			}
		}
	}
	return used, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits).Masked(), true
}

// retryDump repeats a netlink dump the kernel interrupted (a concurrent
// change), a bounded number of times.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range 5 {
		var out []T
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, err
}

// randomStart spreads runs over the range so a leftover from a crashed run
// that a sweep could not remove costs at most one candidate.
func randomStart() int { return subnetMin + rand.IntN(subnetMax-subnetMin+1) }
