package impl

import (
	"context"
	"net/netip"

	"github.com/sandcheck/sandcheck/probes"
)

// AWS's IPv6 metadata endpoint, which filters written for 169.254.169.254
// alone miss.
func init() {
	register(map[string]Func{"metadata.aws-imds-ipv6": imdsIPv6})
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
