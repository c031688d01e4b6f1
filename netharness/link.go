package netharness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// metadataNet is the metadata address as a host route: /32, so holding it
// adds no subnet route and diverts nothing else.
func metadataNet() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: metadataIP.AsSlice(), Mask: net.CIDRMask(32, 32)}}
}

// addMetadataAddr puts 169.254.169.254/32 on the bridge, making it a local
// address of the host that containers on the bridge reach through INPUT.
func addMetadataAddr(bridge string) error {
	l, err := netlink.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	if err := netlink.AddrAdd(l, metadataNet()); err != nil {
		return fmt.Errorf("adding %s to %s: %w", metadataIP, bridge, err)
	}
	return nil
}

// delMetadataAddr removes the address again; a bridge already gone is fine.
func delMetadataAddr(bridge string) error {
	l, err := netlink.LinkByName(bridge)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding bridge %s: %w", bridge, err)
	}
	if err := netlink.AddrDel(l, metadataNet()); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("removing %s from %s: %w", metadataIP, bridge, err)
	}
	return nil
}

// disableIPv6 turns IPv6 off on the bridge: the network is IPv4 only, and a
// link-local IPv6 address on the bridge would let a sandbox reach every host
// service listening on [::], past the IPv4 INPUT rules.
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
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	var out []string
	for _, a := range addrs {
		if a.IP.Equal(metadataIP.AsSlice()) {
			name := fmt.Sprint(a.LinkIndex)
			if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			out = append(out, name)
		}
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
