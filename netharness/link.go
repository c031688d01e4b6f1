package netharness

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// hostNet is one harness address as a host route: /32, so holding it adds
// no subnet route and diverts nothing else.
func hostNet(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}
}

// addHostAddrs puts each address as a /32 on the bridge, making it a local
// address of the host that containers on the bridge reach through INPUT.
func addHostAddrs(bridge string, addrs []netip.Addr) error {
	l, err := netlink.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	for _, a := range addrs {
		if err := netlink.AddrAdd(l, hostNet(a)); err != nil {
			return fmt.Errorf("adding %s to %s: %w", a, bridge, err)
		}
	}
	return nil
}

// delHostAddrs removes the addresses again; a bridge or address already
// gone is fine.
func delHostAddrs(bridge string, addrs []netip.Addr) error {
	l, err := netlink.LinkByName(bridge)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	var errs []error
	for _, a := range addrs {
		if err := netlink.AddrDel(l, hostNet(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("removing %s from %s: %w", a, bridge, err))
		}
	}
	return errors.Join(errs...)
}

// strictReversePath turns strict reverse-path filtering on for the bridge
// alone: a packet from a sandbox whose source address the host would not
// route back through the bridge (a forged address of the host's own
// network) is dropped, so it cannot draw an answer from a canary that
// would leave the machine. (The kernel uses the larger of the "all" and
// the bridge's value.)
func strictReversePath(bridge string) error {
	p := "/proc/sys/net/ipv4/conf/" + bridge + "/rp_filter"
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("setting strict reverse-path filtering on %s: %w", bridge, err)
	}
	return nil
}

// disableIPv6 turns IPv6 off on the bridge: without the IPv6 fence
// (ipv6.go), a link-local IPv6 address on the bridge would let a sandbox
// reach every host service listening on [::], past the IPv4 INPUT rules.
// setupIPv6 turns it back on only behind that fence.
func disableIPv6(bridge string) error {
	p := "/proc/sys/net/ipv6/conf/" + bridge + "/disable_ipv6"
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil // no IPv6 in this kernel
	}
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("disabling IPv6 on %s: %w", bridge, err)
	}
	return nil
}

// linkExists reports whether a link named name exists.
func linkExists(name string) (bool, error) {
	_, err := netlink.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finding link %s: %w", name, err)
	}
	return true, nil
}

// linksHoldingMetadata names the links that carry 169.254.169.254.
func linksHoldingMetadata() ([]string, error) {
	held, err := linksHolding([]netip.Addr{metadataIP})
	for i, h := range held {
		held[i] = strings.TrimPrefix(h, "address "+metadataIP.String()+" on ")
	}
	return held, err
}

// linksHolding describes, as "address A on LINK", every link carrying one
// of addrs.
func linksHolding(addrs []netip.Addr) ([]string, error) {
	all, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	var out []string
	for _, a := range all {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !slices.Contains(addrs, ip.Unmap()) {
			continue
		}
		name := fmt.Sprint(a.LinkIndex)
		if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		out = append(out, fmt.Sprintf("address %s on %s", ip.Unmap(), name))
	}
	return out, nil
}

// metadataListening reports whether any socket in this network namespace
// listens on 169.254.169.254:80.
// It reads /proc/net/tcp instead of connecting: once the harness is gone, a
// connection to that address would leave the host.
func metadataListening() (bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, fmt.Errorf("reading /proc/net/tcp: %w", err)
	}
	defer f.Close()
	return listensOn(f)
}

// harnessListeners describes every TCP listener, UDP socket and raw socket
// (the ICMP observer) bound to one of addrs, from /proc/net/tcp, udp and raw
// (never by connecting). A raw socket's "port" there is its protocol.
func harnessListeners(addrs []netip.Addr) ([]string, error) {
	var out []string
	for _, proto := range []string{"tcp", "udp", "raw", "tcp6", "udp6"} {
		f, err := os.Open("/proc/net/" + proto)
		if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(proto, "6") {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return out, fmt.Errorf("reading /proc/net/%s: %w", proto, err)
		}
		found, err := boundTo(f, addrs, proto == "tcp" || proto == "tcp6")
		f.Close()
		if err != nil {
			return out, err
		}
		for _, ap := range found {
			out = append(out, fmt.Sprintf("%s listener on %s", proto, ap))
		}
	}
	return out, nil
}

// boundTo scans /proc/net/{tcp,udp,raw}[6] content for local addresses in
// addrs (only listening sockets when listenOnly).
func boundTo(r io.Reader, addrs []netip.Addr, listenOnly bool) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (listenOnly && f[3] != "0A") {
			continue
		}
		ipHex, portHex, ok := strings.Cut(f[1], ":")
		ip, okIP := procAddr(ipHex)
		port, err := strconv.ParseUint(portHex, 16, 16)
		if !ok || !okIP || err != nil {
			continue
		}
		if slices.Contains(addrs, ip) {
			out = append(out, netip.AddrPortFrom(ip, uint16(port)))
		}
	}
	return out, sc.Err()
}

// procAddr reads an address as /proc/net shows it: 8 hex digits (IPv4) or
// 32 (IPv6, four 32-bit words), each 32-bit word in host (little-endian)
// byte order.
func procAddr(h string) (netip.Addr, bool) {
	if len(h) != 8 && len(h) != 32 {
		return netip.Addr{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return netip.Addr{}, false
	}
	for w := 0; w < len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	ip, _ := netip.AddrFromSlice(raw)
	return ip, true
}

// listensOn scans /proc/net/tcp content; addresses there are hex, the IPv4
// address in host (little-endian) byte order.
func listensOn(r io.Reader) (bool, error) {
	const (
		metadata = "FEA9FEA9:0050"
		listen   = "0A"
	)
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != listen {
			continue
		}
		if f[1] == metadata {
			return true, nil
		}
	}
	return false, sc.Err()
}
