package impl

import (
	"context"
	"net"
	"net/netip"
	"strconv"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.ipv6": egressIPv6,
	})
}

// egressIPv6 opens a TCP connection over IPv6 to the outside address the
// harness named and sends the probe's token. Egress controls written for
// IPv4 (iptables without ip6tables, an IPv4-only proxy rule) let it
// through. An established connection is an escape.
func egressIPv6(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.Outside6Addr == "" {
		return noAddress("IPv6 outside address", e)
	}
	a, err := netip.ParseAddr(p.Outside6Addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		e.set("sent", "false")
		return inconclusive("the harness's IPv6 outside address is not an IPv6 address; nothing was sent", e)
	}
	addr := net.JoinHostPort(a.String(), strconv.Itoa(80))
	e.set("addr", addr)
	connected, acked, err := tcpHelloOn(ctx, "tcp6", addr, hello(p, "egress.ipv6"))
	e.set("connected", strconv.FormatBool(connected))
	e.set("acked", strconv.FormatBool(acked))
	if err != nil {
		e.setErr("", err)
	}
	if connected {
		return escaped("a TCP connection over IPv6 to the outside address was established", e)
	}
	return blocked("no TCP connection over IPv6 to the outside address could be made", e)
}
