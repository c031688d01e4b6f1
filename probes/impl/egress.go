package impl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.tcp-ports": egressTCPPortsProbe,
		"egress.udp":       egressUDPProbe,
	})
}

// The sink protocol (canary.SinkHello, canary.SinkReply), restated here so
// the probe binary does not link the host-side canary package.
const (
	sinkHello = "SANDCHECK "
	sinkReply = "SANDCHECK-SINK "
)

// egressTCPPorts are the outside ports egress.tcp-ports tries: web,
// alternate web, SSH, SMTP and DNS over TLS.
var egressTCPPorts = []int{80, 443, 22, 25, 853, 8080, 8443}

// egressUDPPorts are the outside ports egress.udp tries: NTP and QUIC.
var egressUDPPorts = []int{123, 443}

// egressTimeout bounds each connection attempt and each wait for a reply.
const egressTimeout = 3 * time.Second

// noAddress decides a probe the harness gave no address for: it sends
// nothing (probes reach only addresses handed to them), so it can only say
// "blocked" when the box has no network interface besides loopback.
func noAddress(what string, e ev) probes.Result {
	e.set("sent", "false")
	ifs, err := net.Interfaces()
	if err != nil {
		e.setErr("interfaces_", err)
		return inconclusive("the harness named no "+what+" and the box's interfaces could not be listed; nothing was sent", e)
	}
	var up []string
	for _, i := range ifs {
		if i.Flags&net.FlagUp != 0 && i.Flags&net.FlagLoopback == 0 {
			up = append(up, i.Name)
		}
	}
	if len(up) == 0 {
		e.set("interfaces", "loopback only")
		return blocked("the box has no network interface besides loopback, so nothing can leave it", e)
	}
	e.setList("interfaces", up)
	return inconclusive("the harness named no "+what+", so nothing was sent; the box has interfaces "+strings.Join(up, ", "), e)
}

// hello is the line a probe sends a sink.
func hello(p probes.Params, probe string) string {
	return sinkHello + headerSafe(p.Token) + "/" + probe + "\n"
}

// tcpAttempt is one TCP connection to a sink port.
type tcpAttempt struct {
	port      int
	connected bool
	acked     bool
	err       error
}

// tcpHello connects to addr, sends the hello and reads the sink's reply.
func tcpHello(ctx context.Context, addr, line string) (connected, acked bool, err error) {
	return tcpHelloOn(ctx, "tcp4", addr, line)
}

// tcpHelloOn is tcpHello over network ("tcp4" or "tcp6").
func tcpHelloOn(ctx context.Context, network, addr, line string) (connected, acked bool, err error) {
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return false, false, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(egressTimeout))
	if _, err := io.WriteString(c, line); err != nil {
		return true, false, err
	}
	reply, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	return true, strings.HasPrefix(reply, sinkReply), err
}

// egressTCPPorts connects to the outside address on each port at once and
// sends its token. Any established connection is an escape: the box opened
// a TCP connection to an address outside its own network.
func egressTCPPortsProbe(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	e.set("addr", p.OutsideAddr)
	line := hello(p, "egress.tcp-ports")
	res := make([]tcpAttempt, len(egressTCPPorts))
	var wg sync.WaitGroup
	for i, port := range egressTCPPorts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, a, err := tcpHello(ctx, net.JoinHostPort(p.OutsideAddr, strconv.Itoa(port)), line)
			res[i] = tcpAttempt{port: port, connected: c, acked: a, err: err}
		}()
	}
	wg.Wait()
	var open, acked, closed []string
	for _, r := range res {
		ps := strconv.Itoa(r.port)
		switch {
		case r.acked:
			acked = append(acked, ps)
			open = append(open, ps)
		case r.connected:
			open = append(open, ps)
		default:
			closed = append(closed, ps)
			if _, ok := e["first_err"]; !ok {
				e.setErr("first_", r.err)
			}
		}
	}
	e.setList("open", open)
	e.setList("acked", acked)
	e.setList("closed", closed)
	if len(open) > 0 {
		return escaped(fmt.Sprintf("TCP connections to the outside address were established on port(s) %s", strings.Join(open, ", ")), e)
	}
	return blocked("no TCP connection to the outside address could be made on any port", e)
}

// egressUDP sends its token in a datagram to each UDP sink port. A reply
// from the sink is an escape; a send the kernel refuses is blocked; a
// datagram sent and never answered is left to the host canary.
func egressUDPProbe(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	e.set("addr", p.OutsideAddr)
	line := hello(p, "egress.udp")
	var answered, sent, refused []string
	for _, port := range egressUDPPorts {
		ps := strconv.Itoa(port)
		ok, wasSent, err := udpHello(ctx, net.JoinHostPort(p.OutsideAddr, ps), line)
		switch {
		case ok:
			answered = append(answered, ps)
		case wasSent:
			sent = append(sent, ps)
		default:
			refused = append(refused, ps)
			if _, done := e["first_err"]; !done {
				e.setErr("first_", err)
			}
		}
	}
	e.setList("answered", answered)
	e.setList("sent_unanswered", sent)
	e.setList("refused", refused)
	switch {
	case len(answered) > 0:
		return escaped("the outside UDP sink answered on port(s) "+strings.Join(answered, ", "), e)
	case len(sent) > 0:
		// A datagram that left but whose answer was dropped shows up at the
		// host canary, whose hit outranks this report.
		return blocked("no UDP sink answered; datagrams left the socket, so the host canary settles whether they left the box", e)
	}
	return blocked("the kernel refused to send any datagram to the outside address", e)
}

// udpHello sends line to addr and waits for the sink's reply. wasSent
// reports that the kernel accepted the datagram.
func udpHello(ctx context.Context, addr, line string) (answered, wasSent bool, err error) {
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, "udp4", addr)
	if err != nil {
		return false, false, err
	}
	defer c.Close()
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	buf := make([]byte, 256)
	// Two tries: one datagram may be lost; the reply is all we wait for.
	for try := range 2 {
		if _, err = c.Write([]byte(line)); err != nil {
			return false, try > 0, err
		}
		wasSent = true
		c.SetReadDeadline(time.Now().Add(egressTimeout / 2))
		n, rerr := c.Read(buf)
		if rerr == nil && strings.HasPrefix(string(buf[:n]), sinkReply) {
			return true, true, nil
		}
		err = rerr
		var ne net.Error
		if rerr != nil && !(errors.As(rerr, &ne) && ne.Timeout()) {
			// ECONNREFUSED from an ICMP port unreachable: the packet left.
			return false, true, rerr
		}
	}
	return false, wasSent, err
}

// ownAddr reports whether ip is one of the addresses the harness handed
// the probe (a guard before sending to anything read from elsewhere).
func ownAddr(p probes.Params, ip netip.Addr) bool {
	var own []netip.Addr
	for _, s := range []string{p.OutsideAddr, p.GatewayAddr, p.NeighbourAddr} {
		if a, err := netip.ParseAddr(s); err == nil {
			own = append(own, a)
		}
	}
	for _, s := range []string{p.ResolverAddr, p.OtherResolverAddr, p.DoTAddr, p.DoHAddr, p.ProxyAddr, p.BrokerAddr, givenMetadataAddr(p)} {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			own = append(own, ap.Addr())
		}
	}
	return slices.Contains(own, ip.Unmap())
}

// givenMetadataAddr is the metadata host:port the probe was given, or the
// standard one.
func givenMetadataAddr(p probes.Params) string {
	if p.MetadataAddr != "" {
		return p.MetadataAddr
	}
	return DefaultMetadataAddr
}
