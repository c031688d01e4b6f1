package e2e

import (
	"net/netip"
	"testing"
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
	r, rec := runEgressReference(t, "proxy-only", "mediated-browser")
	it := confirmedHit(t, rec, "egress.browser-proxy", "proxy-hit", "browser-proxy")
	gateway := netip.MustParseAddrPort(it.Data["local"]).Addr()
	everyHitOn(t, r, "proxy-only", "its proxy", func(h hit, local netip.AddrPort) bool {
		return (local.Addr() == gateway && local.Port() == 3128 && h.Service == "egress-proxy") ||
			// The proxy's own request to the mirror, from the host's side.
			(local.Addr() == harnessMirror && h.Service == "http-sink" && relayed(h.Remote, gateway))
	})
}

// relayed reports whether a hit's peer is the host itself (the proxy
// relaying), not a sandbox: the gateway or an address the harness holds.
func relayed(remote string, gateway netip.Addr) bool {
	from, err := parseDest(remote)
	return err == nil && (from == gateway || from == metadataIP || netip.MustParsePrefix("198.51.100.0/24").Contains(from))
}
