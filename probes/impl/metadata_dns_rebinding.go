package impl

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"metadata.dns-rebinding": metadataDNSRebinding})
}

// rebindPrefix starts the DNS canary's rebinding names, "rebind-<id>.<zone>"
// (canary.RebindPrefix): the first A lookup answers the outside address,
// every later one the metadata address.
const rebindPrefix = "rebind-"

// rebindName is the probe's own rebinding name: its token, reduced to what
// a DNS label holds.
func rebindName(p probes.Params) string {
	id := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, p.Token)
	if len(id) > 40 {
		id = id[:40]
	}
	return dns.Fqdn(rebindPrefix + id + "." + p.DNSZone)
}

// metadataDNSRebinding resolves a name through the configured resolver
// twice: the harness's zone answers an allowed-looking address first and
// the metadata address second, as DNS rebinding does to a filter that checks
// a name once. When the second answer is the metadata address the harness
// gave, the probe connects there and asks for credentials, with its token.
// The metadata service answering is the escape.
func metadataDNSRebinding(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.DNSZone == "" {
		return noAddress("DNS zone", e)
	}
	server, err := configuredResolver(p, e)
	if err != nil {
		e.setErr("", err)
		e.set("sent", "false")
		return inconclusive("the configured resolver is not one the harness gave, so nothing was sent", e)
	}
	name := rebindName(p)
	e.set("resolver", server)
	e.set("name", name)
	var answers []netip.Addr
	for i := range 2 {
		r, err := exchange(ctx, "udp", server, name)
		if err != nil {
			e.setErr("", err)
			if i == 0 {
				return inconclusive("the configured resolver gave no answer; the host canary decides", e)
			}
			return inconclusive("the configured resolver answered once, then not again", e)
		}
		ip, ok := answerA(r)
		if !ok || r.Rcode != dns.RcodeSuccess {
			e.set("rcode", dns.RcodeToString[r.Rcode])
			return blocked("the configured resolver did not resolve the rebinding name ("+dns.RcodeToString[r.Rcode]+")", e)
		}
		answers = append(answers, ip)
	}
	e.set("first", answers[0].String())
	e.set("second", answers[1].String())
	mdHost, mdPort, err := net.SplitHostPort(metadataAddr(p.MetadataAddr))
	if err != nil {
		e.setErr("", err)
		return inconclusive("the harness's metadata address does not parse", e)
	}
	md, _ := netip.ParseAddr(mdHost)
	if answers[1] != md.Unmap() {
		return blocked("the resolver kept the name's first answer (the rebinding did not get through)", e)
	}
	// The second answer is exactly the metadata address the harness gave, so
	// connecting to it reaches nothing the probe was not handed.
	m := newMDClient(p, "metadata.dns-rebinding")
	e.set("addr", net.JoinHostPort(answers[1].String(), mdPort))
	status, _, err := m.do(ctx, http.MethodGet, "/latest/meta-data/iam/security-credentials/", nil)
	if err != nil {
		e.setErr("", err)
		if m.connected {
			return inconclusive("the rebound name led to the metadata address and a connection opened, but no answer came", e)
		}
		return blocked("the rebound name led to the metadata address, which could not be reached", e)
	}
	e.setInt("status", status)
	if status == http.StatusOK {
		return escaped("a name that first resolved to "+answers[0].String()+" resolved to the metadata address on the second lookup, and the metadata service answered through it", e)
	}
	return blocked("the rebound name led to the metadata address, which refused the request", e)
}
