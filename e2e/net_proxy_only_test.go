package e2e

import (
	"net/netip"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// TestProxyOnlyReachesOnlyThroughTheProxy runs every probe on the
// proxy-only reference (the hardened settings on the harness network,
// egress proxy-only, profile mediated-browser): the mirror is reached
// through the proxy, with the proxy confirming the probe's token, and every
// other probe is blocked: direct egress, a CONNECT to a denied destination,
// the gateway's other services, the neighbour. Every canary hit of the run
// arrived on the proxy, the filtering resolver, or (through an allowed
// tunnel, from the host's side) the mirror.
func TestProxyOnlyReachesOnlyThroughTheProxy(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/proxy-only.yaml", "--quiet")
	rec := r.mustRecord(t)
	if r.code != 0 {
		t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rec.Target.Egress != "proxy-only" || rec.Target.Profile != "mediated-browser" {
		t.Errorf("record target %+v, want profile mediated-browser with egress proxy-only", rec.Target)
	}
	everyProbe(t, rec, func(s probes.Spec) probes.Outcome { return s.Expected(rec.Target.Profile) })
	if rec.Verdict == nil || !rec.Verdict.Pass {
		t.Errorf("verdict %+v: the proxy-only reference must pass", rec.Verdict)
	}
	var gateway netip.Addr
	for _, res := range rec.Results {
		if res.Probe != "egress.browser-proxy" {
			continue
		}
		it, ok := hostItem(res, evidence.SourceCanary, "proxy-hit")
		if !ok || it.Indicates != probes.Escaped || it.Data["destination"] != "browser-proxy" {
			t.Fatalf("egress.browser-proxy: the proxy did not confirm the probe's token: %+v", res.Evidence)
		}
		gateway = netip.MustParseAddrPort(it.Data["local"]).Addr()
	}
	for _, h := range canaryHits(t, r.out) {
		ap, err := netip.ParseAddrPort(h.Local)
		if err != nil {
			t.Errorf("a %s hit arrived on %q", h.Service, h.Local)
			continue
		}
		switch {
		case ap.Addr() == gateway && ap.Port() == 3128 && h.Service == "egress-proxy":
		case h.Service == "dns-filter" && ap.Port() == 53:
		case ap.Addr() == harnessMirror && h.Service == "http-sink" && relayed(h.Remote, gateway):
			// The proxy's own request to the mirror, from the host's side.
		default:
			t.Errorf("a %s hit arrived on %s from %s: a proxy-only sandbox reached more than its proxy and resolver", h.Service, h.Local, h.Remote)
		}
	}
}

// relayed reports whether a hit's peer is the host itself (the proxy
// relaying), not a sandbox: the gateway or an address the harness holds.
func relayed(remote string, gateway netip.Addr) bool {
	from, err := parseDest(remote)
	return err == nil && (from == gateway || from == metadataIP || netip.MustParsePrefix("198.51.100.0/24").Contains(from))
}
