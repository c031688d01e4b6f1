package canary

import "net/netip"

// tcpNet is the network to listen on for addr: "tcp6" for an IPv6
// host:port (the harness's IPv6 canaries), "tcp4" for anything else, so
// an IPv4 listener never takes IPv6 connections and the reverse.
func tcpNet(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6() {
		return "tcp6"
	}
	return "tcp4"
}
