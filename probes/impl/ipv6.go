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
		"metadata.aws-imds-ipv6": imdsIPv6,
		"egress.ipv6":            egressIPv6,
	})
}

// imdsIPv6 asks AWS's IPv6 instance metadata endpoint, at the address the
// harness named (fd00:ec2::254 on its bridge), for an IMDSv2 session token
// and then the role credentials. Filters written for 169.254.169.254 alone
// miss it. Any HTTP answer is an escape.
func imdsIPv6(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.Metadata6Addr == "" {
		return noAddress("IPv6 metadata address", e)
	}
	ap, err := netip.ParseAddrPort(p.Metadata6Addr)
	if err != nil || !ap.Addr().Is6() || ap.Addr().Is4In6() {
		e.set("sent", "false")
		return inconclusive("the harness's IPv6 metadata address is not an IPv6 address and port; nothing was sent", e)
	}
	q := p
	q.MetadataAddr = ap.String()
	return imdsV2With(ctx, newMDClient(q, "metadata.aws-imds-ipv6"), e, "the IPv6 metadata address")
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
