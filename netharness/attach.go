package netharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"

	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A Namespace is a network namespace the harness makes for a sandbox that
// is not a Docker container (the bwrap and process runners): either
// isolated (loopback only) or attached to a harness network's bridge by a
// veth pair, like the neighbour (neighbour.go), holding an address of the
// upper half of the run's /24, which Docker never hands out, and a default
// route through the gateway. Its traffic is then the bridge's traffic: the
// harness's FORWARD drops and INPUT fence (firewall.go) cover it as they
// cover a container, and nothing routes off the machine. It speaks IPv4
// only.
//
// The namespace lives as long as its file and the processes in it; Close
// drops the file and deletes the veth pair.
type Namespace struct {
	file     *os.File
	hostLink string // the veth end on the bridge, scat-<8 hex>; "" when isolated
	bridge   string
	addr     netip.Addr
	gateway  netip.Addr
	owner    string
	v6       bool

	closeMu sync.Mutex
	closed  bool
}

// Attached hosts of the upper half of a run's /24, by bridge: the
// addresses this process has handed out. One harness network exists per
// host at a time (the host lock), and the process that made it is the one
// that attaches sandboxes to it, so this list is complete.
var (
	attachMu sync.Mutex
	attached = map[string]map[byte]bool{}
)

// First and last host part handed to attached namespaces (the neighbour
// holds neighbourHost).
const (
	attachFirst = neighbourHost + 1
	attachLast  = 254
)

// Isolated makes a network namespace with only its loopback, up.
func Isolated() (*Namespace, error) {
	ns := &Namespace{}
	err := inNewNamespace(func(hostNS int, f *os.File) error {
		ns.file = f
		return upLoopback()
	})
	if err != nil {
		return nil, fmt.Errorf("making an isolated network namespace: %w", err)
	}
	return ns, nil
}

// Attach makes a network namespace for sandbox owner (its runner's ID) on
// the harness network named network, looked up through the engine: it must
// be a Docker network labelled as the harness's (LabelHarness), with the
// harness's bridge. See AttachTo.
func Attach(ctx context.Context, docker client.NetworkAPIClient, network, owner string) (*Namespace, error) {
	res, err := docker.NetworkInspect(ctx, network, client.NetworkInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("attaching to network %s: %w", network, err)
	}
	nw := res.Network
	if nw.Labels[LabelHarness] != "1" {
		return nil, fmt.Errorf("attaching to network %s: not a harness network (no %s label); refusing", network, LabelHarness)
	}
	bridge := nw.Options[optBridgeName]
	if bridge == "" || len(nw.IPAM.Config) != 1 {
		return nil, fmt.Errorf("attaching to network %s: no bridge name or not one subnet", network)
	}
	subnet, gateway := nw.IPAM.Config[0].Subnet, nw.IPAM.Config[0].Gateway
	if !subnet.Addr().Is4() || subnet.Bits() != 24 || !subnet.Contains(gateway) {
		return nil, fmt.Errorf("attaching to network %s: subnet %s and gateway %s are not a harness layout", network, subnet, gateway)
	}
	ns, err := attach(bridge, subnet, gateway, owner)
	if err != nil {
		return nil, fmt.Errorf("attaching to network %s: %w", network, err)
	}
	return ns, nil
}

// AttachTo makes a network namespace for sandbox owner on the run's harness
// network n (the one the engine hands a netharness.Joiner runner). When the
// harness has turned IPv6 on for the bridge (and the host does not forward
// IPv6), the namespace gets its IPv6 address and route too, the ones
// AttachIPv6 gives a container. On error it undoes what it did.
func AttachTo(n *Network, owner string) (*Namespace, error) {
	ns, err := attach(n.bridge, n.plan.Subnet, n.plan.Gateway, owner)
	if err != nil {
		return nil, fmt.Errorf("attaching to network %s: %w", n.name, err)
	}
	return ns, nil
}

func attach(bridge string, subnet netip.Prefix, gateway netip.Addr, owner string) (ns *Namespace, err error) {
	v6, err := bridgeIPv6(bridge)
	if err != nil {
		return nil, err
	}
	host, err := takeHost(bridge)
	if err != nil {
		return nil, err
	}
	a := subnet.Addr().As4()
	a[3] = host
	ns = &Namespace{hostLink: hostLinkName("scat-"), bridge: bridge, addr: netip.AddrFrom4(a), gateway: gateway, owner: owner, v6: v6}
	defer func() {
		if err != nil {
			err = errors.Join(err, ns.Close())
			ns = nil
		}
	}()
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		return ns, fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	err = inNewNamespace(func(hostNS int, f *os.File) error {
		ns.file = f
		return ns.configure(hostNS, subnet)
	})
	if err != nil {
		return ns, err
	}
	return ns, plugIntoBridge("link", ns.hostLink, br, bridge)
}

// hostLinkName is a fresh name for a host-side veth end: prefix and 8 hex
// digits.
func hostLinkName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// plugIntoBridge attaches the host-side veth end hostLink to the bridge br
// (named bridge) and brings it up. kind names the link in the error that
// it was not found ("link", "neighbour link").
func plugIntoBridge(kind, hostLink string, br netlink.Link, bridge string) error {
	hl, err := netlink.LinkByName(hostLink)
	if err != nil {
		return fmt.Errorf("finding %s %s: %w", kind, hostLink, err)
	}
	if err := netlink.LinkSetMaster(hl, br); err != nil {
		return fmt.Errorf("attaching %s to %s: %w", hostLink, bridge, err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fmt.Errorf("bringing %s up: %w", hostLink, err)
	}
	return nil
}

// bridgeIPv6 reports whether the harness turned IPv6 on for the bridge
// (setupIPv6) and the host does not forward IPv6.
func bridgeIPv6(bridge string) (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + bridge + "/disable_ipv6")
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading IPv6 state of %s: %w", bridge, err)
	}
	if string(b) != "0\n" {
		return false, nil
	}
	fwd, err := IPv6Forwarding()
	if err != nil || fwd {
		return false, errors.Join(errors.New("the kernel forwards IPv6; refusing to give a sandbox IPv6"), err)
	}
	return true, nil
}

// takeHost reserves a free host part on the bridge.
func takeHost(bridge string) (byte, error) {
	attachMu.Lock()
	defer attachMu.Unlock()
	used := attached[bridge]
	if used == nil {
		used = map[byte]bool{}
		attached[bridge] = used
	}
	for h := attachFirst; h <= attachLast; h++ {
		if !used[byte(h)] {
			used[byte(h)] = true
			return byte(h), nil
		}
	}
	return 0, fmt.Errorf("every address from .%d to .%d of %s is attached", attachFirst, attachLast, bridge)
}

func releaseHost(bridge string, a netip.Addr) {
	attachMu.Lock()
	defer attachMu.Unlock()
	if used := attached[bridge]; used != nil {
		delete(used, a.As4()[3])
		if len(used) == 0 {
			delete(attached, bridge)
		}
	}
}

// inNewNamespace runs fn on a locked thread moved into a new network
// namespace, with the host's namespace and the new one's file, then moves
// the thread back (a thread that cannot go back stays locked and retires
// with its goroutine, as in startNeighbour). The file is closed when fn
// fails.
func inNewNamespace(fn func(hostNS int, f *os.File) error) error {
	return onLockedThread(func(hostNS int) error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("creating a network namespace: %w", err)
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			return fmt.Errorf("opening the new network namespace: %w", err)
		}
		if err := fn(hostNS, f); err != nil {
			f.Close()
			return err
		}
		return nil
	})
}

// onLockedThread runs fn on a locked thread, with the host's network
// namespace (the thread's at the start) open as hostNS, then moves the
// thread back into it. Only then is the thread unlocked: a thread that
// cannot go back stays locked and retires with its goroutine, so no other
// goroutine ever runs in a namespace fn moved it to.
func onLockedThread(fn func(hostNS int) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hostNS, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("opening the host's network namespace: %w", err)
			return
		}
		defer unix.Close(hostNS)
		err = fn(hostNS)
		if serr := unix.Setns(hostNS, unix.CLONE_NEWNET); serr != nil {
			done <- errors.Join(err, fmt.Errorf("returning to the host's network namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

func upLoopback() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

// configure runs inside the new namespace: the veth pair with its peer in
// the host's namespace, IPv6 off, the address and the default route
// through the gateway.
func (ns *Namespace) configure(hostNS int, subnet netip.Prefix) error {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: ns.hostLink, PeerNamespace: netlink.NsFd(hostNS)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth pair %s: %w", ns.hostLink, err)
	}
	if !ns.v6 {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1\n"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disabling IPv6: %w", err)
		}
	}
	if err := upLoopback(); err != nil {
		return err
	}
	eth, err := netlink.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("finding eth0: %w", err)
	}
	ipn := &net.IPNet{IP: ns.addr.AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)}
	if err := netlink.AddrAdd(eth, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("adding %s: %w", ns.addr, err)
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bringing eth0 up: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: ns.gateway.AsSlice()}); err != nil {
		return fmt.Errorf("adding the default route through %s: %w", ns.gateway, err)
	}
	if ns.v6 {
		// The same address and route a container gets (AttachIPv6).
		return configureSandbox6(ns.addr, sandboxAddr6(ns.addr))
	}
	return nil
}

// File is the namespace (an nsfs file), for setns or nsenter --net.
func (ns *Namespace) File() *os.File { return ns.file }

// Addr is the namespace's address on the harness network (invalid when
// isolated).
func (ns *Namespace) Addr() netip.Addr { return ns.addr }

// HostLink is the veth end on the bridge ("" when isolated).
func (ns *Namespace) HostLink() string { return ns.hostLink }

// Close drops the harness's hold on the namespace and deletes the veth
// pair (deleting one end deletes both); the namespace itself goes with the
// last process in it. Calling it twice is safe.
func (ns *Namespace) Close() error {
	ns.closeMu.Lock()
	defer ns.closeMu.Unlock()
	if ns.closed {
		return nil
	}
	if ns.file != nil {
		ns.file.Close()
		ns.file = nil
	}
	if ns.hostLink != "" {
		l, err := netlink.LinkByName(ns.hostLink)
		switch {
		case errors.As(err, &netlink.LinkNotFoundError{}):
		case err != nil:
			return fmt.Errorf("finding link %s: %w", ns.hostLink, err)
		default:
			// The pair also goes by itself once the namespace's last
			// process has: a link gone meanwhile is fine.
			if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
				return fmt.Errorf("deleting link %s: %w", ns.hostLink, err)
			}
		}
		releaseHost(ns.bridge, ns.addr)
	}
	ns.closed = true
	return nil
}

// Leftovers lists what of the namespace's plumbing still exists on the
// host: its veth end.
func (ns *Namespace) Leftovers() ([]string, error) {
	if ns.hostLink == "" {
		return nil, nil
	}
	ok, err := linkExists(ns.hostLink)
	if err != nil {
		return nil, err
	}
	if ok {
		return []string{"link " + ns.hostLink + " still exists"}, nil
	}
	return nil, nil
}
