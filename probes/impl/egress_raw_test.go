package impl

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseDefaultGateway(t *testing.T) {
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
		"eth0\t00000000\t01A9FEA9\t0003\t0\t0\t0\t00000000\n" +
		"eth0\t00A9FEA9\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
	gw, err := parseDefaultGateway(strings.NewReader(route), "eth0")
	if err != nil || gw != netip.MustParseAddr("169.254.169.1") {
		t.Errorf("gateway %s (err %v), want 169.254.169.1", gw, err)
	}
	if _, err := parseDefaultGateway(strings.NewReader(route), "eth1"); err == nil {
		t.Error("a gateway through an interface without a default route")
	}
}

func TestParseARP(t *testing.T) {
	arp := "IP address       HW type     Flags       HW address            Mask     Device\n" +
		"169.254.150.1    0x1         0x2         02:42:a9:fe:96:01     *        eth0\n" +
		"169.254.150.9    0x1         0x0         00:00:00:00:00:00     *        eth0\n"
	mac, err := parseARP(strings.NewReader(arp), netip.MustParseAddr("169.254.150.1"))
	if err != nil || mac.String() != "02:42:a9:fe:96:01" {
		t.Errorf("mac %s (err %v)", mac, err)
	}
	if _, err := parseARP(strings.NewReader(arp), netip.MustParseAddr("169.254.150.9")); err == nil {
		t.Error("an incomplete entry was used")
	}
}

// TestIPv4Packet checks the hand-built header: a header whose checksum is
// folded in sums to zero, and the fields sit where RFC 791 puts them.
func TestIPv4Packet(t *testing.T) {
	src, dst := netip.MustParseAddr("169.254.150.2"), netip.MustParseAddr("198.51.100.10")
	udp := udpDatagram(40000, 123, []byte("SANDCHECK tok/egress.packet-socket\n"))
	pkt := ipv4Packet(src, dst, udp)
	if ipChecksum(pkt[:20]) != 0 {
		t.Errorf("header checksum does not verify: % x", pkt[:20])
	}
	if pkt[0] != 0x45 || pkt[9] != 17 || int(pkt[2])<<8|int(pkt[3]) != len(pkt) ||
		netip.AddrFrom4([4]byte(pkt[12:16])) != src || netip.AddrFrom4([4]byte(pkt[16:20])) != dst {
		t.Errorf("header % x", pkt[:20])
	}
	if int(udp[4])<<8|int(udp[5]) != len(udp) || int(udp[2])<<8|int(udp[3]) != 123 {
		t.Errorf("udp header % x", udp[:8])
	}
}
