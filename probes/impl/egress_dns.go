package impl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.dns-exfil":  dnsExfil,
		"egress.dns-direct": dnsDirect,
	})
}

// exfilLabel marks exfiltration names in the harness zone:
// "<token>.<probe-id>.x.<zone>" (canary.ExfilLabel).
const exfilLabel = "x"

// dnsTimeout bounds one DNS exchange.
const dnsTimeout = 3 * time.Second

// exfilName encodes the token and probe ID in labels under the zone, the way
// hostile code smuggles data out in names.
func exfilName(p probes.Params, probe string) string {
	return dns.Fqdn(strings.ToLower(headerSafe(p.Token)) + "." + probe + "." + exfilLabel + "." + p.DNSZone)
}

// exchange sends one A query for name to server over netw ("udp", "tcp")
// and returns the answer. connected reports, for TCP, that a connection
// was established (UDP has none to tell).
func exchange(ctx context.Context, netw, server, name string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.RecursionDesired = true
	cl := &dns.Client{Net: netw, Timeout: dnsTimeout, UDPSize: dns.MinMsgSize}
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	r, _, err := cl.ExchangeContext(ctx, m, server)
	return r, err
}

// answerA returns the first A record of r.
func answerA(r *dns.Msg) (netip.Addr, bool) {
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A); ok {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// configuredResolver picks the resolver from /etc/resolv.conf that the probe
// may use: the runtime's own loopback resolver (Docker's 127.0.0.11, which
// forwards to what the harness configured) or the harness's resolver. Any
// other nameserver is not the probe's to send to.
func configuredResolver(p probes.Params, e ev) (string, error) {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return "", fmt.Errorf("reading /etc/resolv.conf: %w", err)
	}
	defer f.Close()
	cfg, err := dns.ClientConfigFromReader(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("parsing /etc/resolv.conf: %w", err)
	}
	e.setList("nameservers", cfg.Servers)
	harness, _ := netip.ParseAddrPort(p.ResolverAddr)
	for _, s := range cfg.Servers {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if ip.IsLoopback() || ip == harness.Addr() {
			return net.JoinHostPort(ip.String(), "53"), nil
		}
	}
	return "", errors.New("no nameserver in /etc/resolv.conf is loopback or the harness's resolver")
}

// dnsExfil asks the configured resolver for a name carrying the probe's
// token under a zone only the harness answers. An answer from that zone
// means the query, and the data in its labels, left the box.
func dnsExfil(ctx context.Context, p probes.Params) probes.Result {
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
	name := exfilName(p, "egress.dns-exfil")
	e.set("resolver", server)
	e.set("name", name)
	var r *dns.Msg
	for range 2 { // one retry: a single UDP datagram may be lost
		if r, err = exchange(ctx, "udp", server, name); err == nil {
			break
		}
	}
	if err != nil {
		e.setErr("", err)
		return inconclusive("the configured resolver gave no answer; the host canary decides", e)
	}
	e.set("rcode", dns.RcodeToString[r.Rcode])
	if ip, ok := answerA(r); ok && r.Rcode == dns.RcodeSuccess {
		e.set("answer", ip.String())
		if ip.String() == p.OutsideAddr {
			e.set("answer_is_harness", "true")
		}
		return escaped("the configured resolver resolved a name carrying the token under the harness zone: the query left the box", e)
	}
	return blocked("the configured resolver did not resolve the harness zone ("+dns.RcodeToString[r.Rcode]+")", e)
}

// dnsDirect queries a DNS server the box was not configured to use, over
// UDP and TCP. Any answer is an escape: hostile code can bypass a filtering
// resolver by talking to its own.
func dnsDirect(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OtherResolverAddr == "" || p.DNSZone == "" {
		return noAddress("other resolver", e)
	}
	if answered := queryUDPAndTCP(ctx, p.OtherResolverAddr, exfilName(p, "egress.dns-direct"), e); len(answered) > 0 {
		return escaped("a DNS server the box was not configured to use answered over "+strings.Join(answered, " and "), e)
	}
	// A UDP query that left but whose answer was dropped shows up at the
	// host canary, whose hit outranks this report.
	return blocked("no DNS exchange with the other resolver was possible over UDP or TCP", e)
}

// queryUDPAndTCP asks server for name over UDP, then TCP, records each
// answer's rcode or error in e, and returns the transports that answered.
func queryUDPAndTCP(ctx context.Context, server, name string, e ev) []string {
	e.set("server", server)
	var answered []string
	for _, netw := range []string{"udp", "tcp"} {
		r, err := exchange(ctx, netw, server, name)
		if err != nil {
			e.setErr(netw+"_", err)
			continue
		}
		e.set(netw+"_rcode", dns.RcodeToString[r.Rcode])
		answered = append(answered, netw)
	}
	e.setList("answered", answered)
	return answered
}
