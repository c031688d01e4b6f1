package netharness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/canary"
)

// The neighbour is a stand-in for another tenant's sandbox on the same
// harness network: a network namespace of the harness's own, joined to the
// bridge by a veth pair, holding an address of the run's subnet that Docker
// never hands out (the upper half, outside the IPAM range), with token-
// recording listeners on a service port and an exec-daemon-style control
// port. A sandbox reaches it across the bridge, as it would a neighbouring
// container, and never through the host's INPUT chain.
//
// The namespace is anonymous: it lives as long as the harness holds its
// file descriptor and the listeners' sockets, so a dead run takes it, and
// the veth pair with it, down with its process. Nothing is left to sweep.

// NeighbourPorts are the neighbour's listening ports: an application port
// and the Docker engine API port, the unauthenticated exec daemon a
// careless neighbour leaves open.
var NeighbourPorts = []int{8080, 2375}

// neighbourHost is the host part of the neighbour's address in the run's
// /24: in the upper half, which the IPAM range leaves alone.
const neighbourHost = 200

// RoleNeighbour names the neighbour sandbox as a destination.
const RoleNeighbour = "neighbour"

// neighbour is the running stand-in.
type neighbour struct {
	addr      netip.Addr
	hostLink  string // the veth end on the bridge, scnb-<8 hex>
	nsFD      int
	listeners []*canary.Listener
}

// neighbourAddr is the neighbour's address in plan p.
func neighbourAddr(p plan) netip.Addr {
	a := p.Subnet.Addr().As4()
	a[3] = neighbourHost
	return netip.AddrFrom4(a)
}

// startNeighbour builds the namespace, the veth pair and the listeners. On
// error it undoes what it did.
func startNeighbour(ctx context.Context, bridge string, p plan, sink *canary.Sink) (nb *neighbour, err error) {
	nb = &neighbour{addr: neighbourAddr(p), hostLink: hostLinkName("scnb-"), nsFD: -1}
	defer func() {
		if err != nil {
			err = errors.Join(err, nb.close(context.WithoutCancel(ctx)))
			nb = nil
		}
	}()
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		return nb, fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	// The namespace work runs on a locked thread, which goes back to the
	// host's namespace afterwards. Only then is it unlocked: a thread that
	// could not go back stays locked, and the goroutine's end retires it, so
	// no other goroutine ever runs in the neighbour's namespace. (Going back
	// matters even then: the thread may be the process's main thread, which
	// Go never retires and whose namespace /proc/self/net shows.)
	err = onLockedThread(func(hostNS int) error {
		return nb.buildInNamespace(ctx, p, sink, hostNS)
	})
	if err != nil {
		return nb, err
	}
	return nb, plugIntoBridge("neighbour link", nb.hostLink, br, bridge)
}

// buildInNamespace runs on a locked thread: it moves the thread into a new
// network namespace (the caller moves it back to hostNS), creates the veth pair with its peer end in the host's
// namespace, configures the neighbour's side and opens the listeners there.
func (nb *neighbour) buildInNamespace(ctx context.Context, p plan, sink *canary.Sink, hostNS int) error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("creating the neighbour's network namespace: %w", err)
	}
	var err error
	if nb.nsFD, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("opening the neighbour's network namespace: %w", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: nb.hostLink, PeerNamespace: netlink.NsFd(hostNS)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth pair %s: %w", nb.hostLink, err)
	}
	// The neighbour speaks IPv4 only, like the rest of the harness network.
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1\n"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disabling IPv6 in the neighbour: %w", err)
	}
	for _, name := range []string{"lo", "eth0"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("finding the neighbour's %s: %w", name, err)
		}
		if name == "eth0" {
			ipn := &net.IPNet{IP: nb.addr.AsSlice(), Mask: net.CIDRMask(p.Subnet.Bits(), 32)}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
				return fmt.Errorf("adding %s to the neighbour: %w", nb.addr, err)
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("bringing the neighbour's %s up: %w", name, err)
		}
	}
	for _, port := range NeighbourPorts {
		l, err := sink.ServeTCP(ctx, net.JoinHostPort(nb.addr.String(), strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("starting neighbour listener: %w", err)
		}
		nb.listeners = append(nb.listeners, l)
	}
	return nil
}

// close stops the listeners, drops the namespace and deletes the veth pair
// (deleting one end deletes both). Safe on a partly built neighbour.
func (nb *neighbour) close(ctx context.Context) error {
	var errs []error
	for _, l := range nb.listeners {
		if err := l.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	nb.listeners = nil
	if nb.nsFD >= 0 {
		unix.Close(nb.nsFD)
		nb.nsFD = -1
	}
	if l, err := netlink.LinkByName(nb.hostLink); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("deleting neighbour link %s: %w", nb.hostLink, err))
		}
	} else if !errors.As(err, &netlink.LinkNotFoundError{}) {
		errs = append(errs, fmt.Errorf("finding neighbour link %s: %w", nb.hostLink, err))
	}
	return errors.Join(errs...)
}
