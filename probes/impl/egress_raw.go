package impl

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// rawUDPPort is the outside UDP sink port the raw and packet socket probes
// address (NTP, one of egressUDPPorts).
const rawUDPPort = 123

func init() {
	register(map[string]Func{
		"egress.icmp":          egressICMP,
		"egress.raw-socket":    egressRawSocket,
		"egress.packet-socket": egressPacketSocket,
	})
}

// egressICMP sends an ICMP echo request carrying the probe's hello to the
// outside address, through an unprivileged ping socket if the kernel allows
// one (net.ipv4.ping_group_range) and a raw socket otherwise. An echo reply
// from the outside address is the escape: ICMP left the box, and ICMP
// payloads tunnel data as well as any other protocol.
func egressICMP(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	dst, err := netip.ParseAddr(p.OutsideAddr)
	if err != nil {
		e.setErr("", err)
		return inconclusive("the outside address does not parse", e)
	}
	e.set("addr", dst.String())
	var c *icmp.PacketConn
	var to net.Addr
	kind := "ping"
	c, err = icmp.ListenPacket("udp4", "0.0.0.0")
	to = &net.UDPAddr{IP: dst.AsSlice()}
	if err != nil {
		e.setErr("ping_socket_", err)
		kind = "raw"
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		to = &net.IPAddr{IP: dst.AsSlice()}
	}
	if err != nil {
		e.setErr("raw_socket_", err)
		return blocked("no ICMP socket could be opened: ping sockets are not granted to this group and raw sockets need NET_RAW", e)
	}
	defer c.Close()
	e.set("socket", kind)
	payload := []byte(hello(p, "egress.icmp"))
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: 1, Data: payload}}
	b, err := msg.Marshal(nil)
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the echo request", e)
	}
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	if _, err := c.WriteTo(b, to); err != nil {
		e.setErr("", err)
		return blocked("the kernel refused to send the echo request to the outside address", e)
	}
	e.set("sent", "true")
	buf := make([]byte, 1500)
	for range 32 { // other ICMP traffic may arrive on a raw socket; bounded
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			e.setErr("", err)
			break
		}
		if fromAddr(from) != dst {
			continue
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if echo, ok := m.Body.(*icmp.Echo); ok && strings.HasPrefix(string(echo.Data), sinkHello) {
			return escaped("the outside address answered an ICMP echo request carrying the token ("+kind+" socket)", e)
		}
	}
	// An echo the firewall dropped never reaches the host's ICMP observer;
	// one that arrived shows up there, and that hit outranks this report.
	return blocked("no echo reply came from the outside address; the host's ICMP observer settles whether the request left the box", e)
}

// fromAddr is the IP of a ReadFrom peer.
func fromAddr(a net.Addr) netip.Addr {
	var ip net.IP
	switch v := a.(type) {
	case *net.UDPAddr:
		ip = v.IP
	case *net.IPAddr:
		ip = v.IP
	}
	got, _ := netip.AddrFromSlice(ip)
	return got.Unmap()
}

// egressRawSocket opens a raw IPv4 socket (which needs NET_RAW) and sends,
// through it, a hand-built UDP datagram carrying the probe's hello to the
// outside address's UDP sink. Its source port is that of an ordinary UDP
// socket of the probe's, which receives the sink's reply. A raw socket
// sends whatever headers hostile code writes, past anything that filters at
// the socket layer.
func egressRawSocket(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		e.setErr("", err)
		return blocked("the kernel refused to open a raw IPv4 socket (EPERM: no NET_RAW; EAFNOSUPPORT: the runtime offers none)", e)
	}
	defer unix.Close(fd)
	e.set("raw_socket", "opened")
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	uc, src, dst, err := replySocket(p.OutsideAddr)
	if err != nil {
		e.setErr("", err)
		return blocked("no route to the outside address", e)
	}
	defer uc.Close()
	e.set("addr", dst.String())
	dgram := udpDatagram(src.Port(), rawUDPPort, []byte(hello(p, "egress.raw-socket")))
	sa := &unix.SockaddrInet4{Addr: dst.Addr().As4()}
	if err := unix.Sendto(fd, dgram, 0, sa); err != nil {
		e.setErr("", err)
		return blocked("the raw socket opened but the kernel refused to send through it", e)
	}
	e.set("sent", "true")
	return awaitSinkReply(ctx, uc, e, "raw socket")
}

// egressPacketSocket opens a packet socket (AF_PACKET, which needs
// NET_RAW) and sends, through it, a whole hand-built IPv4 packet carrying a
// UDP datagram with the probe's hello to the outside address's UDP sink,
// framed for the default gateway's hardware address. A packet socket skips
// the host's IP stack inside the box altogether.
func egressPacketSocket(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	// Protocol 0: the socket receives nothing, it only sends.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		e.setErr("", err)
		return blocked("the kernel refused to open a packet socket (EPERM: no NET_RAW; EAFNOSUPPORT: the runtime offers none)", e)
	}
	defer unix.Close(fd)
	e.set("packet_socket", "opened")
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	uc, src, dst, err := replySocket(p.OutsideAddr)
	if err != nil {
		e.setErr("", err)
		return blocked("no route to the outside address", e)
	}
	defer uc.Close()
	e.set("addr", dst.String())
	ifi, err := interfaceOf(src.Addr())
	if err != nil {
		e.setErr("", err)
		return inconclusive("the interface holding the box's address was not found", e)
	}
	e.set("interface", ifi.Name)
	gw, err := defaultGateway(ifi.Name)
	if err != nil {
		e.setErr("", err)
		return inconclusive("the box's default gateway was not found", e)
	}
	e.set("gateway", gw.String())
	mac, err := neighbourMAC(ctx, p, gw)
	if err != nil {
		e.setErr("", err)
		return inconclusive("the default gateway's hardware address is not known", e)
	}
	pkt := ipv4Packet(src.Addr(), dst.Addr(), udpDatagram(src.Port(), rawUDPPort, []byte(hello(p, "egress.packet-socket"))))
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index, Halen: uint8(len(mac))}
	copy(sa.Addr[:], mac)
	if err := unix.Sendto(fd, pkt, 0, sa); err != nil {
		e.setErr("", err)
		return blocked("the packet socket opened but the kernel refused to send through it", e)
	}
	e.set("sent", "true")
	return awaitSinkReply(ctx, uc, e, "packet socket")
}

// replySocket opens an ordinary UDP socket "connected" to the outside sink
// (nothing is sent) so that the kernel picks the source address and port
// the hand-built datagram will carry, and the sink's reply lands here.
func replySocket(outside string) (*net.UDPConn, netip.AddrPort, netip.AddrPort, error) {
	ip, err := netip.ParseAddr(outside)
	if err != nil {
		return nil, netip.AddrPort{}, netip.AddrPort{}, fmt.Errorf("parsing the outside address: %w", err)
	}
	dst := netip.AddrPortFrom(ip, rawUDPPort)
	uc, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return nil, netip.AddrPort{}, netip.AddrPort{}, fmt.Errorf("opening the reply socket: %w", err)
	}
	src := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	return uc, netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), dst, nil
}

// awaitSinkReply waits for the outside UDP sink's answer on uc.
func awaitSinkReply(ctx context.Context, uc *net.UDPConn, e ev, via string) probes.Result {
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	uc.SetReadDeadline(deadline)
	buf := make([]byte, 256)
	n, err := uc.Read(buf)
	if err == nil && strings.HasPrefix(string(buf[:n]), sinkReply) {
		return escaped("the outside UDP sink answered a datagram sent through a "+via, e)
	}
	if err != nil {
		e.setErr("", err)
	}
	return blocked("no answer came from the outside UDP sink; the host canary settles whether the datagram left the box", e)
}

// udpDatagram is a UDP header and payload. The checksum is left zero,
// which IPv4 allows (RFC 768).
func udpDatagram(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], payload)
	return b
}

// ipv4Packet puts a 20-byte IPv4 header (protocol UDP, TTL 64, don't
// fragment) before a UDP datagram.
func ipv4Packet(src, dst netip.Addr, udp []byte) []byte {
	b := make([]byte, 20+len(udp))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:], uint16(os.Getpid()))
	binary.BigEndian.PutUint16(b[6:], 0x4000)
	b[8], b[9] = 64, unix.IPPROTO_UDP
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], ipChecksum(b[:20]))
	copy(b[20:], udp)
	return b
}

// ipChecksum is the Internet checksum (RFC 1071) of b.
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// interfaceOf finds the interface holding addr.
func interfaceOf(addr netip.Addr) (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	for i := range ifs {
		addrs, err := ifs[i].Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == addr {
					return &ifs[i], nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no interface holds %s", addr)
}

// defaultGateway reads the IPv4 default route's gateway through ifname
// from /proc/net/route.
func defaultGateway(ifname string) (netip.Addr, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading /proc/net/route: %w", err)
	}
	defer f.Close()
	return parseDefaultGateway(io.LimitReader(f, 1<<20), ifname)
}

// parseDefaultGateway reads /proc/net/route content: Iface, Destination,
// Gateway, with addresses as host-order (little-endian) hex.
func parseDefaultGateway(r io.Reader, ifname string) (netip.Addr, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != ifname || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}), nil
	}
	if err := sc.Err(); err != nil {
		return netip.Addr{}, err
	}
	return netip.Addr{}, errors.New("no default route through " + ifname)
}

// neighbourMAC finds gw's hardware address in /proc/net/arp. When the box
// has not talked to the gateway yet, it opens (and closes at once) a TCP
// connection to the resolver the harness gave, if that is the gateway, so
// the kernel resolves it.
func neighbourMAC(ctx context.Context, p probes.Params, gw netip.Addr) (net.HardwareAddr, error) {
	if mac, err := arpLookup(gw); err == nil {
		return mac, nil
	}
	res, err := netip.ParseAddrPort(p.ResolverAddr)
	if err != nil || res.Addr() != gw {
		return nil, fmt.Errorf("%s is not in /proc/net/arp and is not the harness's resolver", gw)
	}
	d := net.Dialer{Timeout: time.Second}
	if c, err := d.DialContext(ctx, "tcp4", res.String()); err == nil {
		c.Close()
	}
	for range 10 {
		if mac, err := arpLookup(gw); err == nil {
			return mac, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s is not in /proc/net/arp", gw)
}

// arpLookup reads /proc/net/arp for a complete entry for ip.
func arpLookup(ip netip.Addr) (net.HardwareAddr, error) {
	f, err := os.Open("/proc/net/arp")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/net/arp: %w", err)
	}
	defer f.Close()
	return parseARP(io.LimitReader(f, 1<<20), ip)
}

// parseARP reads /proc/net/arp content: IP, HW type, flags, HW address.
func parseARP(r io.Reader, ip netip.Addr) (net.HardwareAddr, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != ip.String() || f[2] == "0x0" {
			continue
		}
		mac, err := net.ParseMAC(f[3])
		if err != nil || len(mac) != 6 {
			continue
		}
		return mac, nil
	}
	return nil, fmt.Errorf("no complete entry for %s in /proc/net/arp", ip)
}
