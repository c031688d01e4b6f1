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

// metadataHostnames are the names cloud resolvers answer with the metadata
// service's address (canary.MetadataHostnames), each with the credentials
// path and header its cloud's SDKs use.
var metadataHostnames = []struct {
	name, path string
	hdr        map[string]string
}{
	{"metadata.google.internal.", "/computeMetadata/v1/instance/service-accounts/default/token", map[string]string{"Metadata-Flavor": "Google"}},
	{"metadata.goog.", "/computeMetadata/v1/instance/service-accounts/default/token", map[string]string{"Metadata-Flavor": "Google"}},
	{"instance-data.ec2.internal.", "/latest/meta-data/iam/security-credentials/", nil},
}

func init() {
	register(map[string]Func{"metadata.hostnames": metadataHostnamesProbe})
}

// metadataHostnamesProbe resolves the cloud metadata host names through the
// sandbox's configured resolver and, for a name that resolves to the
// metadata address the harness gave, asks the metadata service there for
// credentials with the token. A filter that blocks 169.254.169.254 by
// address but lets the names resolve (or the reverse) is caught here; the
// metadata service answering is the escape.
func metadataHostnamesProbe(ctx context.Context, p probes.Params) probes.Result {
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
	e.set("resolver", server)
	mdHost, mdPort, err := net.SplitHostPort(metadataAddr(p.MetadataAddr))
	if err != nil {
		e.setErr("", err)
		return inconclusive("the harness's metadata address does not parse", e)
	}
	md, _ := netip.ParseAddr(mdHost)
	var resolved, unresolved []string
	for _, h := range metadataHostnames {
		r, err := exchange(ctx, "udp", server, h.name)
		if err != nil {
			unresolved = append(unresolved, h.name+" (no answer)")
			continue
		}
		ip, ok := answerA(r)
		if !ok || r.Rcode != dns.RcodeSuccess {
			unresolved = append(unresolved, h.name+" ("+dns.RcodeToString[r.Rcode]+")")
			continue
		}
		resolved = append(resolved, h.name+" "+ip.String())
		if ip != md.Unmap() {
			continue // only the address the harness gave is the probe's to reach
		}
		e.setList("resolved", resolved)
		e.set("addr", net.JoinHostPort(ip.String(), mdPort))
		e.set("name", h.name)
		m := newMDClient(p, "metadata.hostnames")
		status, _, err := m.do(ctx, http.MethodGet, h.path, h.hdr)
		if err != nil {
			e.setErr("", err)
			if m.connected {
				return inconclusive("a metadata host name led to the metadata address and a connection opened, but no answer came", e)
			}
			return blocked("a metadata host name resolved to the metadata address, which could not be reached", e)
		}
		e.setInt("status", status)
		if status == http.StatusOK {
			return escaped(strings.TrimSuffix(h.name, ".")+" resolved through the sandbox's resolver to the metadata address, and the metadata service handed out credentials there", e)
		}
		return blocked("a metadata host name led to the metadata address, which refused the request", e)
	}
	e.setList("resolved", resolved)
	e.setList("unresolved", unresolved)
	if len(resolved) > 0 {
		return blocked("the metadata host names resolved, but not to the metadata address the harness runs", e)
	}
	return blocked("the sandbox's resolver does not resolve the cloud metadata host names", e)
}
