package netharness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-iptables/iptables"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/netns"
)

// IPv6 on the harness network. Docker is never asked for IPv6 (its bridge
// driver turns net.ipv6.conf.all.forwarding on for an IPv6 network, and in
// 20.10 it writes no ip6tables rules); the harness configures it itself,
// with harness-owned prefixes only:
//
//   - the bridge holds v6Gateway in v6Prefix (a ULA that is not the host's
//     own fd00::/64), the IPv6 metadata address fd00:ec2::254 (AWS IMDS's
//     IPv6 endpoint) and outsideIP6 in the documentation range 2001:db8::/32,
//     all local addresses of the host reached through INPUT;
//   - each sandbox gets an address in v6Prefix and a default route through
//     v6Gateway, set in its network namespace by the harness (AttachIPv6).
//
// The fence comes first and goes last: FORWARD drops everything into or
// out of the bridge, INPUT from the bridge accepts neighbour discovery and
// the harness's own IPv6 addresses (under the open profile; under any other
// none) and drops the rest, so nothing else of the host (fd00::2, its
// link-local addresses) is reachable. The kernel forwards no IPv6 here
// (net.ipv6.conf.all.forwarding = 0); the harness never changes that, and
// leaves IPv6 off for the run when it finds forwarding on.
var (
	v6Prefix    = netip.MustParsePrefix("fd00:ec2::/64")
	v6Gateway   = netip.MustParseAddr("fd00:ec2::1")
	metadataIP6 = netip.MustParseAddr("fd00:ec2::254")
	outsideIP6  = netip.MustParseAddr("2001:db8::10")
	// docPrefix6 is the IPv6 documentation range, which the host must not
	// route anywhere for the harness to hold outsideIP6.
	docPrefix6 = netip.MustParsePrefix("2001:db8::/32")
)

// sandboxHost6 is the interface ID of a sandbox's IPv6 address: fd00:ec2::c:<n>
// for the last byte n of its IPv4 address on the run's subnet.
const sandboxHost6 = 0x0c

// OutsidePorts6 are the IPv6 outside address's TCP sink ports.
var OutsidePorts6 = []int{80}

// ipv6ForwardingPath is the host's IPv6 forwarding switch (a variable for
// tests, which point it at a file of their own; the harness only reads it).
var ipv6ForwardingPath = "/proc/sys/net/ipv6/conf/all/forwarding"

// IPv6Forwarding reports whether the kernel forwards IPv6 (in the calling
// process's network namespace).
func IPv6Forwarding() (bool, error) {
	b, err := os.ReadFile(ipv6ForwardingPath)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ipv6ForwardingPath, err)
	}
	switch strings.TrimSpace(string(b)) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("reading %s: unexpected %q", ipv6ForwardingPath, b)
}

// hostAddrs6 are the IPv6 addresses the harness puts on its bridge, the
// gateway first.
func hostAddrs6() []netip.Addr { return []netip.Addr{v6Gateway, metadataIP6, outsideIP6} }

// hostNet6 is one IPv6 address as the bridge holds it: the gateway with the
// prefix's on-link route (replies to sandboxes take it), the rest as /128s
// that add no route. No duplicate address detection: the bridge holds
// nothing else, and DAD would delay the canaries' start.
func hostNet6(a netip.Addr) *netlink.Addr {
	bits := 128
	if a == v6Gateway {
		bits = v6Prefix.Bits()
	}
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 128)}, Flags: unix.IFA_F_NODAD}
}

// checkIPv6Free refuses a host where the harness's IPv6 prefixes already
// mean something: an address or a route (other than the default route)
// overlapping fd00:ec2::/64 or 2001:db8::/32.
func checkIPv6Free() error {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	if err != nil {
		return fmt.Errorf("listing IPv6 addresses: %w", err)
	}
	var used []netip.Prefix
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			used = append(used, netip.PrefixFrom(ip, 128))
		}
	}
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("listing IPv6 routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue // the default route
		}
		ip, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if ok && ones > 0 {
			used = append(used, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	for _, u := range used {
		for _, mine := range []netip.Prefix{v6Prefix, docPrefix6} {
			if u.Overlaps(mine) {
				return fmt.Errorf("choosing IPv6 addresses: %s is already in use on this host (overlaps %s)", u, mine)
			}
		}
	}
	return nil
}

// forwardRules6 drop every forwarded IPv6 packet into or out of the
// bridge. The kernel forwards no IPv6 here; these hold even if something
// turns forwarding on during the run. (With br_netfilter they also drop
// IPv6 between two sandboxes on the bridge: the harness's IPv6 is for
// reaching its canaries, not each other.)
func forwardRules6(bridge string) []rule {
	return []rule{
		{"FORWARD", []string{"-i", bridge, "-j", "DROP"}},
		{"FORWARD", []string{"-o", bridge, "-j", "DROP"}},
	}
}

// inputRules6 let IPv6 from the bridge, from the sandboxes' prefix, reach
// only the harness's own IPv6 addresses, and only under the open profile; every other profile grants
// no IPv6 destination (its resolver and services are IPv4), rejecting TCP
// and UDP at once as its IPv4 rules do. Neighbour solicitations and
// advertisements (hop limit 255, so only from the bridge's own link) are
// accepted under every profile: without them no address on the bridge
// resolves. Router advertisements, redirects and everything else are
// dropped.
func inputRules6(bridge, egress string) []rule {
	var rules []rule
	for _, t := range []string{"neighbour-solicitation", "neighbour-advertisement"} {
		rules = append(rules, rule{"INPUT", []string{"-i", bridge, "-p", "ipv6-icmp", "-m", "icmp6", "--icmpv6-type", t, "-m", "hl", "--hl-eq", "255", "-j", "ACCEPT"}})
	}
	// Only from the sandboxes' own prefix: IPv6 has no rp_filter, and a
	// packet with a forged source (an address of the host's own network)
	// would otherwise draw an answer from the host that leaves the machine.
	src := v6Prefix.String()
	if egress == "" || egress == "open" {
		for _, a := range []netip.Addr{metadataIP6, outsideIP6} {
			rules = append(rules, rule{"INPUT", []string{"-i", bridge, "-s", src, "-d", a.String() + "/128", "-j", "ACCEPT"}})
		}
	} else {
		rules = append(rules,
			rule{"INPUT", []string{"-i", bridge, "-s", src, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"}},
			rule{"INPUT", []string{"-i", bridge, "-s", src, "-p", "udp", "-j", "REJECT", "--reject-with", "icmp6-port-unreachable"}})
	}
	return append(rules, rule{"INPUT", []string{"-i", bridge, "-j", "DROP"}})
}

// sweptChains6 are the ip6tables chains the harness adds rules to.
var sweptChains6 = []string{"FORWARD", "INPUT"}

// bridgeSysctls6 are set on the bridge before IPv6 goes on there: the host
// must never take a router advertisement or redirect from a sandbox (a
// hostile one could otherwise add a route or address to the host), nor
// make up addresses of its own.
var bridgeSysctls6 = [][2]string{{"accept_ra", "0"}, {"accept_redirects", "0"}, {"autoconf", "0"}, {"accept_source_route", "0"}}

// setSysctl6 writes one per-interface IPv6 setting in the calling
// thread's network namespace.
func setSysctl6(link, key, val string) error {
	p := "/proc/sys/net/ipv6/conf/" + link + "/" + key
	if err := os.WriteFile(p, []byte(val+"\n"), 0o644); err != nil {
		return fmt.Errorf("setting %s to %s: %w", p, val, err)
	}
	return nil
}

// setupIPv6 fences the bridge for IPv6, turns IPv6 on there and puts the
// harness's IPv6 addresses on it. It does nothing (IPv6 stays off for the
// run, the probes get no IPv6 address) when the kernel forwards IPv6 or
// ip6tables is missing, and says why.
func (n *Network) setupIPv6(egress string) error {
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		n.log.Warn("IPv6 stays off on the harness network: the kernel forwards IPv6 (or its setting cannot be read), and the harness never gives sandboxes IPv6 then", "err", err)
		return nil
	}
	ipt6, err := iptables.NewWithProtocol(iptables.ProtocolIPv6)
	if err != nil {
		n.log.Warn("IPv6 stays off on the harness network: no ip6tables to fence it", "err", err)
		return nil
	}
	if err := checkIPv6Free(); err != nil {
		return err
	}
	n.ipt6 = ipt6
	// Fence first: no IPv6 packet is processed on the bridge before it.
	if n.rules6, err = insertRules(n.ipt6, append(forwardRules6(n.bridge), inputRules6(n.bridge, egress)...)); err != nil {
		return err
	}
	for _, kv := range bridgeSysctls6 {
		if err := setSysctl6(n.bridge, kv[0], kv[1]); err != nil {
			return err
		}
	}
	n.addr6Done = true // set first: a partial add is undone too
	if err := setSysctl6(n.bridge, "disable_ipv6", "0"); err != nil {
		return err
	}
	l, err := netlink.LinkByName(n.bridge)
	if err != nil {
		return fmt.Errorf("finding bridge %s: %w", n.bridge, err)
	}
	for _, a := range hostAddrs6() {
		if err := netlink.AddrAdd(l, hostNet6(a)); err != nil {
			return fmt.Errorf("adding %s to %s: %w", a, n.bridge, err)
		}
	}
	// The host's forwarding must still be off: turning IPv6 on must not
	// have changed it.
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		return errors.Join(errors.New("IPv6 forwarding is on after setting up the bridge; refusing IPv6"), err)
	}
	n.v6 = true
	return nil
}

// teardownIPv6 turns IPv6 off on the bridge (which drops its IPv6
// addresses), removes any address left and then the fence.
func (n *Network) teardownIPv6() error {
	var errs []error
	if n.addr6Done {
		if ok, _ := linkExists(n.bridge); ok {
			if err := disableIPv6(n.bridge); err != nil {
				errs = append(errs, err)
			}
			if l, err := netlink.LinkByName(n.bridge); err == nil {
				for _, a := range hostAddrs6() {
					if err := netlink.AddrDel(l, hostNet6(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENODEV) {
						errs = append(errs, fmt.Errorf("removing %s from %s: %w", a, n.bridge, err))
					}
				}
			}
		}
	}
	for _, r := range slices.Backward(n.rules6) {
		if err := deleteRule(n.ipt6, r); err != nil {
			errs = append(errs, err)
		}
	}
	n.rules6 = nil
	return errors.Join(errs...)
}

// IPv6 reports whether the run's network gives sandboxes IPv6.
func (n *Network) IPv6() bool { return n.v6 }

// Metadata6Addr is the IPv6 metadata canary, "[fd00:ec2::254]:80", or ""
// when the run has no IPv6.
func (n *Network) Metadata6Addr() string {
	if !n.v6 {
		return ""
	}
	return net.JoinHostPort(metadataIP6.String(), "80")
}

// Outside6Addr is the IPv6 outside address with its sinks (OutsidePorts6),
// or the zero Addr when the run has no IPv6.
func (n *Network) Outside6Addr() netip.Addr {
	if !n.v6 {
		return netip.Addr{}
	}
	return outsideIP6
}

// AttachIPv6 gives one sandbox, already started on the network, its IPv6
// address and default route, in its own network namespace (found through
// the container's process). It refuses the host's own namespace and a
// host that forwards IPv6. Without IPv6 on the run it does nothing.
func (n *Network) AttachIPv6(ctx context.Context, containerID string) error {
	if !n.v6 {
		return nil
	}
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		return errors.Join(errors.New("attaching IPv6: the kernel forwards IPv6 now; refusing"), err)
	}
	ci, ok := n.docker.(client.ContainerAPIClient)
	if !ok {
		return errors.New("attaching IPv6: the docker client cannot inspect containers")
	}
	ins, err := ci.ContainerInspect(ctx, containerID, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("attaching IPv6: inspecting %.12s: %w", containerID, err)
	}
	c := ins.Container
	if c.State == nil || c.State.Pid <= 0 {
		return fmt.Errorf("attaching IPv6: container %.12s has no process", containerID)
	}
	if c.NetworkSettings == nil || c.NetworkSettings.Networks[n.name] == nil {
		return fmt.Errorf("attaching IPv6: container %.12s is not on %s", containerID, n.name)
	}
	v4 := c.NetworkSettings.Networks[n.name].IPAddress
	if !v4.Is4() || !n.plan.IPRange.Contains(v4) {
		return fmt.Errorf("attaching IPv6: container %.12s has address %s, not one of %s", containerID, v4, n.plan.IPRange)
	}
	addr := sandboxAddr6(v4)
	// The engine's own file of the container's namespace, not the one its
	// init is in now: a box that may make namespaces can move its first
	// process into one of its own before this runs.
	key := c.NetworkSettings.SandboxKey
	if !filepath.IsAbs(key) {
		return fmt.Errorf("attaching IPv6: container %.12s: the engine names no network namespace file (SandboxKey %q)", containerID, key)
	}
	return inNetns(key, func() error { return configureSandbox6(v4, addr) })
}

// sandboxAddr6 is the IPv6 address of the sandbox with IPv4 address v4.
func sandboxAddr6(v4 netip.Addr) netip.Addr {
	a := v6Prefix.Addr().As16()
	a[13] = sandboxHost6
	a[15] = v4.As4()[3]
	return netip.AddrFrom16(a)
}

// inNetns runs fn inside the network namespace the namespace file path
// holds (netns.DoFile). It refuses the caller's own namespace (a container
// on the host's network).
func inNetns(path string, fn func() error) error {
	var hs, ts unix.Stat_t
	if err := errors.Join(unix.Stat("/proc/self/ns/net", &hs), unix.Stat(path, &ts)); err != nil {
		return fmt.Errorf("comparing the network namespace file %s with the host's: %w", path, err)
	}
	if hs.Dev == ts.Dev && hs.Ino == ts.Ino {
		return fmt.Errorf("%s is the host's own network namespace: refusing to configure it", path)
	}
	return netns.DoFile(context.Background(), path, fn)
}

// configureSandbox6 runs in a sandbox's network namespace: it finds the
// interface holding v4, turns IPv6 on there (router advertisements off:
// the sandbox's IPv6 routes are the harness's alone), adds addr in
// v6Prefix and a default route through v6Gateway.
func configureSandbox6(v4, addr netip.Addr) error {
	all, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing the sandbox's addresses: %w", err)
	}
	idx := slices.IndexFunc(all, func(a netlink.Addr) bool { ip, _ := netip.AddrFromSlice(a.IP); return ip.Unmap() == v4 })
	if idx < 0 {
		return fmt.Errorf("no interface of the sandbox holds %s", v4)
	}
	l, err := netlink.LinkByIndex(all[idx].LinkIndex)
	if err != nil {
		return fmt.Errorf("finding the sandbox's interface: %w", err)
	}
	name := l.Attrs().Name
	for _, kv := range [][2]string{{"accept_ra", "0"}, {"autoconf", "0"}, {"disable_ipv6", "0"}} {
		if err := setSysctl6(name, kv[0], kv[1]); err != nil {
			return err
		}
	}
	ipn := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(v6Prefix.Bits(), 128)}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn, Flags: unix.IFA_F_NODAD}); err != nil {
		return fmt.Errorf("adding %s to the sandbox's %s: %w", addr, name, err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: v6Gateway.AsSlice()}); err != nil {
		return fmt.Errorf("adding the sandbox's IPv6 default route: %w", err)
	}
	return nil
}

// leftovers6 lists what of the IPv6 side still exists: ip6tables rules
// naming the bridge, the harness's IPv6 addresses on any link, listeners
// on them.
func (n *Network) leftovers6() ([]string, error) {
	var out []string
	var errs []error
	ipt6 := n.ipt6
	if ipt6 == nil {
		var err error
		if ipt6, err = iptables.NewWithProtocol(iptables.ProtocolIPv6); err != nil {
			ipt6 = nil // no ip6tables: no rule of ours either
		}
	}
	if ipt6 != nil && n.bridge != "" {
		rules, err := harnessRulesIn(ipt6, sweptChains6, n.bridge)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range rules {
			out = append(out, "ip6tables rule "+r.String())
		}
	}
	held, err := linksHolding(hostAddrs6())
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, held...)
	listeners, err := harnessListeners(hostAddrs6())
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, listeners...)
	return out, errors.Join(errs...)
}

// sweepRules6 removes ip6tables rules naming any harness bridge (a dead
// run's fence). A host without ip6tables has none.
func sweepRules6() ([]string, error) {
	ipt6, err := iptables.NewWithProtocol(iptables.ProtocolIPv6)
	if err != nil {
		return nil, nil
	}
	rules, err := harnessRulesIn(ipt6, sweptChains6, "")
	var removed []string
	errs := []error{err}
	for _, r := range rules {
		if err := deleteRule(ipt6, r); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "ip6tables rule "+r.String())
	}
	return removed, errors.Join(errs...)
}
