package netharness

import "github.com/sandcheck/sandcheck/probes"

// paramAddrs declares, once, which of the network's canary addresses fills
// which field of the probe's parameters; a new canary adds one line here.
var paramAddrs = []struct {
	addr func(*Network) string
	set  func(*probes.Params, string)
}{
	{(*Network).MetadataAddr, func(p *probes.Params, v string) { p.MetadataAddr = v }},
	{func(n *Network) string { return n.OutsideAddr().String() }, func(p *probes.Params, v string) { p.OutsideAddr = v }},
	{(*Network).DNSZone, func(p *probes.Params, v string) { p.DNSZone = v }},
	{func(n *Network) string { return n.DNS() + ":53" }, func(p *probes.Params, v string) { p.ResolverAddr = v }},
	{(*Network).OtherResolverAddr, func(p *probes.Params, v string) { p.OtherResolverAddr = v }},
	{(*Network).MirrorAddr, func(p *probes.Params, v string) { p.MirrorAddr = v }},
	{(*Network).DNSAltAddr, func(p *probes.Params, v string) { p.DNSAltAddr = v }},
	{(*Network).ECSAddr, func(p *probes.Params, v string) { p.ECSAddr = v }},
	{(*Network).AlibabaAddr, func(p *probes.Params, v string) { p.AlibabaAddr = v }},
	{(*Network).KubeAPIAddr, func(p *probes.Params, v string) { p.KubeAPIAddr = v }},
	{func(n *Network) string { return n.GatewayAddr().String() }, func(p *probes.Params, v string) { p.GatewayAddr = v }},
	{func(n *Network) string { return n.NeighbourAddr().String() }, func(p *probes.Params, v string) { p.NeighbourAddr = v }},
	{(*Network).DoTAddr, func(p *probes.Params, v string) { p.DoTAddr = v }},
	{(*Network).DoHAddr, func(p *probes.Params, v string) { p.DoHAddr = v }},
	{(*Network).ProxyAddr, func(p *probes.Params, v string) { p.ProxyAddr = v }},
	{(*Network).BrokerAddr, func(p *probes.Params, v string) { p.BrokerAddr = v }},
	{(*Network).BrokerToken, func(p *probes.Params, v string) { p.BrokerToken = v }},
	{ipv6Only((*Network).Metadata6Addr), func(p *probes.Params, v string) { p.Metadata6Addr = v }},
	{ipv6Only(func(n *Network) string { return n.Outside6Addr().String() }), func(p *probes.Params, v string) { p.Outside6Addr = v }},
}

// ipv6Only gives an IPv6 canary's address only when the run has IPv6.
func ipv6Only(addr func(*Network) string) func(*Network) string {
	return func(n *Network) string {
		if !n.IPv6() {
			return ""
		}
		return addr(n)
	}
}

// FillParams names the network's canaries in a probe's parameters.
func (n *Network) FillParams(p *probes.Params) {
	for _, a := range paramAddrs {
		a.set(p, a.addr(n))
	}
}
