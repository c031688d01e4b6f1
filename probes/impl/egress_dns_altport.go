package impl

import (
	"context"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"egress.dns-alt-port": dnsAltPort})
}

// dnsAltPort queries the harness's resolver on its alternate port, over UDP
// and TCP, with the token in the name. Any answer is an escape: a filter
// that watches only port 53 lets DNS on another port through.
func dnsAltPort(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.DNSAltAddr == "" || p.DNSZone == "" {
		return noAddress("alternate-port resolver", e)
	}
	if answered := queryUDPAndTCP(ctx, p.DNSAltAddr, exfilName(p, "egress.dns-alt-port"), e); len(answered) > 0 {
		return escaped("a DNS server on an alternate port answered over "+strings.Join(answered, " and "), e)
	}
	return blocked("no DNS exchange on the alternate port was possible over UDP or TCP", e)
}
