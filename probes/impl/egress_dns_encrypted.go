package impl

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/miekg/dns"

	"github.com/sandcheck/sandcheck/probes"
)

// dohPath is where a DoH server answers (RFC 8484; canary.DoHPath).
const dohPath = "/dns-query"

func init() {
	register(map[string]Func{
		"egress.dns-tcp": dnsTCP,
		"egress.dot":     dnsOverTLS,
		"egress.doh":     dnsOverHTTPS,
	})
}

// dnsTCP asks the configured resolver, over TCP, for a name carrying the
// probe's token under the harness zone. An answer from the zone means the
// query left the box: filters that inspect DNS over UDP only miss it.
func dnsTCP(ctx context.Context, p probes.Params) probes.Result {
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
	name := exfilName(p, "egress.dns-tcp")
	e.set("resolver", server)
	e.set("name", name)
	r, err := exchange(ctx, "tcp", server, name)
	if err != nil {
		e.setErr("", err)
		return blocked("no DNS exchange with the configured resolver over TCP was possible", e)
	}
	return zoneAnswer(p, r, e, "the configured resolver, over TCP,")
}

// zoneAnswer decides a DNS exchange that got an answer: an A record for
// the exfiltration name is the escape.
func zoneAnswer(p probes.Params, r *dns.Msg, e ev, who string) probes.Result {
	e.set("rcode", dns.RcodeToString[r.Rcode])
	if ip, ok := answerA(r); ok && r.Rcode == dns.RcodeSuccess {
		e.set("answer", ip.String())
		return escaped(who+" resolved a name carrying the token under the harness zone: the query left the box", e)
	}
	return blocked(who+" did not resolve the harness zone ("+dns.RcodeToString[r.Rcode]+")", e)
}

// encryptedTLS is how hostile code talks to a resolver of its choosing: it
// has no reason to check the certificate, and the harness's is self-signed.
func encryptedTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
}

// dnsOverTLS sends the exfiltration query to a DNS-over-TLS server (RFC
// 7858) the box was not configured to use. Encrypted DNS hides the names
// from any filter that reads DNS on the wire.
func dnsOverTLS(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.DoTAddr == "" || p.DNSZone == "" {
		return noAddress("DNS-over-TLS server", e)
	}
	e.set("server", p.DoTAddr)
	m := new(dns.Msg)
	m.SetQuestion(exfilName(p, "egress.dot"), dns.TypeA)
	cl := &dns.Client{Net: "tcp-tls", Timeout: dnsTimeout, TLSConfig: encryptedTLS()}
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	r, _, err := cl.ExchangeContext(ctx, m, p.DoTAddr)
	if err != nil {
		e.setErr("", err)
		return blocked("no DNS-over-TLS exchange was possible", e)
	}
	return zoneAnswer(p, r, e, "a DNS-over-TLS server the box was not configured to use")
}

// dnsOverHTTPS POSTs the exfiltration query in DNS wire format to a DoH
// endpoint (RFC 8484) the box was not configured to use. DoH looks like
// any other HTTPS to a filter.
func dnsOverHTTPS(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.DoHAddr == "" || p.DNSZone == "" {
		return noAddress("DNS-over-HTTPS server", e)
	}
	e.set("server", p.DoHAddr)
	m := new(dns.Msg)
	m.SetQuestion(exfilName(p, "egress.doh"), dns.TypeA)
	m.Id = 0 // RFC 8484 4.1: 0 for cache friendliness
	wire, err := m.Pack()
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the DNS query", e)
	}
	ctx, cancel := context.WithTimeout(ctx, egressTimeout)
	defer cancel()
	d := net.Dialer{Timeout: egressTimeout}
	connected := false
	cl := &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := d.DialContext(ctx, "tcp4", p.DoHAddr)
				connected = connected || err == nil
				return c, err
			},
			TLSClientConfig:   encryptedTLS(),
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       egressTimeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+p.DoHAddr+dohPath, bytes.NewReader(wire))
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the DoH request", e)
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	resp, err := cl.Do(req)
	if err != nil {
		e.setErr("", err)
		if connected {
			return inconclusive("a connection to the DoH server opened but no answer came", e)
		}
		return blocked("no connection to the DoH server could be made", e)
	}
	defer resp.Body.Close()
	e.setInt("status", resp.StatusCode)
	body, err := io.ReadAll(io.LimitReader(resp.Body, dns.MaxMsgSize))
	if err != nil || resp.StatusCode != http.StatusOK {
		e.setErr("", errors.Join(err, fmt.Errorf("status %d", resp.StatusCode)))
		return inconclusive("the DoH server answered, but not with a DNS message", e)
	}
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		e.setErr("", err)
		return inconclusive("the DoH server's answer is not a DNS message", e)
	}
	return zoneAnswer(p, r, e, "a DNS-over-HTTPS server the box was not configured to use")
}
