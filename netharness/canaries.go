package netharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/sandcheck/sandcheck/canary"
)

// The harness's "outside": documentation addresses (RFC 5737 TEST-NET-2)
// that the harness holds as /32s on its own bridge, so a sandbox reaches
// them through its default route, as it would a host on the internet, while
// the packets never leave this machine. They are local addresses of the
// host, reached through INPUT; forwarding stays dropped.
var (
	// outsideIP holds the TCP and UDP sinks.
	outsideIP = netip.MustParseAddr("198.51.100.10")
	// otherResolverIP holds a DNS canary that is not the sandbox's
	// configured resolver (DNS straight to another server).
	otherResolverIP = netip.MustParseAddr("198.51.100.53")
	// mirrorIP holds an HTTP sink standing for the platform's package
	// mirror, the one destination a mirror-only sandbox may reach.
	mirrorIP = netip.MustParseAddr("198.51.100.80")
	// kubeAPIIP holds the Kubernetes API canary (KubeAPIPort), the address
	// the cluster DNS names of the API server resolve to.
	kubeAPIIP = netip.MustParseAddr("198.51.100.43")
)

// KubeAPIPort is the Kubernetes API canary's HTTPS port, the port of the
// kubernetes service (KUBERNETES_SERVICE_PORT).
const KubeAPIPort = 443

// MirrorPort is the package mirror's HTTP port.
const MirrorPort = 80

// Ports of the canaries.
var (
	// SinkTCPPorts are the outside TCP ports with a sink: web, alternate
	// web, SSH, SMTP and DNS over TLS.
	SinkTCPPorts = []int{80, 443, 22, 25, 853, 8080, 8443}
	// SinkUDPPorts are the outside UDP ports with a sink: NTP and QUIC.
	SinkUDPPorts = []int{123, 443}
)

// GatewayServicePorts are the ports of the token-recording listener on the
// bridge gateway, the host's side of the harness network: the Docker engine
// API and the kubelet, host services a sandbox must never reach.
var GatewayServicePorts = []int{2375, 10250}

const (
	dnsPort = 53
	// DNSAltPort is where the gateway's DNS canary also answers, for a
	// resolver on an alternate port.
	DNSAltPort = 5353
)

// Destination roles the canaries stand for; a hit's evidence names them as
// data.destination (see docs/policy.md).
const (
	RoleOutside       = "outside"
	RoleOtherResolver = "other-resolver"
	RoleResolver      = "harness-resolver"
	// RolePackageMirror is the name profiles allow a package mirror by
	// (policies/rego/profiles.rego, allowed_destinations).
	RolePackageMirror = "package-mirror"
	// RoleHostService is a listener on the gateway other than the resolver:
	// a service of the host itself.
	RoleHostService = "host-service"
	// RoleKubeAPI is the Kubernetes API canary.
	RoleKubeAPI = "kube-api"
)

// metadataRedirect is where the outside sink's /redirect sends a client.
const metadataRedirect = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"

// hostAddrs are the addresses the harness puts on its bridge.
func hostAddrs() []netip.Addr {
	return []netip.Addr{metadataIP, outsideIP, otherResolverIP, mirrorIP, ecsIP, alibabaIP, kubeAPIIP}
}

// closer is anything the harness started and must stop.
type closer interface{ Close(context.Context) error }

// checkOutsideFree refuses a host where the outside addresses already mean
// something: holding them would then divert real traffic.
func checkOutsideFree(used []netip.Prefix) error {
	for _, ip := range []netip.Addr{outsideIP, otherResolverIP, mirrorIP, ecsIP, alibabaIP, kubeAPIIP} {
		for _, u := range used {
			if u.Contains(ip) {
				return fmt.Errorf("choosing outside addresses: %s is already in %s on this host", ip, u)
			}
		}
	}
	return nil
}

// canaryAddrs is where the harness serves each declared canary service
// (canary.Services) on its network. The DNS canary is the sandbox's
// resolver (gateway:53) only under the open egress profile; under a
// restricted one a filtering resolver stands there (startResolver).
func (n *Network) canaryAddrs() map[string][]string {
	gw := n.plan.Gateway.String()
	hp := func(ip netip.Addr, ports ...int) []string {
		out := make([]string, len(ports))
		for i, p := range ports {
			out[i] = net.JoinHostPort(ip.String(), strconv.Itoa(p))
		}
		return out
	}
	dnsAddrs := []string{n.DNSAltAddr(), n.OtherResolverAddr()}
	if n.openEgress() {
		dnsAddrs = append([]string{net.JoinHostPort(gw, strconv.Itoa(dnsPort))}, dnsAddrs...)
	}
	m := map[string][]string{
		"metadata":     {n.MetadataAddr()},
		"ecs":          {n.ECSAddr()},
		"alibaba":      {n.AlibabaAddr()},
		"kube-api":     {n.KubeAPIAddr()},
		"dns":          dnsAddrs,
		"dot":          {n.DoTAddr()},
		"doh":          {n.DoHAddr()},
		"sink":         hp(outsideIP, SinkTCPPorts...),
		"udp-sink":     hp(outsideIP, SinkUDPPorts...),
		"icmp":         {outsideIP.String()},
		"mirror":       {n.MirrorAddr()},
		"host-service": hp(n.plan.Gateway, GatewayServicePorts...),
		"proxy":        {n.ProxyAddr()},
		"broker":       {n.BrokerAddr()},
	}
	if n.v6 {
		m["metadata"] = append(m["metadata"], n.Metadata6Addr())
		m["sink"] = append(m["sink"], hp(outsideIP6, OutsidePorts6...)...)
	}
	return m
}

// openEgress reports whether the network runs the open egress profile.
func (n *Network) openEgress() bool { return n.egress == "" || n.egress == "open" }

// canaryKit makes the handlers of the run's canaries, all recording to
// rec; the metadata canary's is n.meta.
func (n *Network) canaryKit(rec *canary.Recorder, log *slog.Logger) (*canary.Kit, error) {
	n.dns = canary.NewDNS(canary.DNSOptions{Recorder: rec, Logger: log, Outside: outsideIP, Metadata: metadataIP, Mirror: mirrorIP, KubeAPI: kubeAPIIP})
	n.kube = canary.NewKubeAPI(canary.KubeAPIOptions{Recorder: rec, Logger: log})
	for _, t := range n.kubeTokens {
		n.kube.AcceptToken(t)
	}
	bt := make([]byte, 16)
	if _, err := rand.Read(bt); err != nil {
		return nil, fmt.Errorf("making the broker token: %w", err)
	}
	n.brokerToken = "scb" + hex.EncodeToString(bt)
	n.toolBroker = canary.NewBroker(rec, n.brokerToken, n.openEgress())
	return &canary.Kit{
		Logger:      log,
		Metadata:    n.meta,
		KubeAPI:     n.kube,
		DNS:         n.dns,
		Outside:     canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: RoleOutside, RedirectTo: metadataRedirect}),
		Mirror:      canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: RolePackageMirror}),
		HostService: canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: RoleHostService}),
		Proxy:       canary.NewProxy(canary.ProxyOptions{Recorder: rec, Logger: log, Owned: n.owns, Allow: n.proxyAllows}),
		Broker:      n.toolBroker,
	}, nil
}

// startCanaries starts every declared canary service (canary.Services) on
// its harness addresses (canaryAddrs), the sandbox's resolver and the
// neighbour. They all run whatever the egress profile: the INPUT rules
// decide which of them a sandbox reaches, and a listener it cannot reach
// proves that by staying silent. Every listener is appended to n.canaries
// as it starts, so Close stops what started even when a later one fails.
func (n *Network) startCanaries(ctx context.Context, rec *canary.Recorder, log *slog.Logger) error {
	kit, err := n.canaryKit(rec, log)
	if err != nil {
		return err
	}
	addrs := n.canaryAddrs()
	for _, svc := range canary.Services {
		for _, a := range addrs[svc.Name] {
			l, err := svc.Serve(ctx, kit, a)
			if err != nil {
				return fmt.Errorf("starting the %s canary on %s: %w", svc.Name, a, err)
			}
			n.canaries = append(n.canaries, l)
		}
	}
	if !n.openEgress() {
		if err := n.startResolver(ctx, rec, log); err != nil {
			return err
		}
	}
	nbSink := canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: RoleNeighbour})
	if n.neighbour, err = startNeighbour(ctx, n.bridge, n.plan, nbSink); err != nil {
		return err
	}
	n.neighbourLink = n.neighbour.hostLink
	return nil
}

// startResolver starts the sandbox's resolver under a restricted egress
// profile: not the canary but a filtering resolver on gateway:53 that
// answers the names the profile grants and refuses the rest, as the
// platform's would; the canary stays on the addresses the sandbox must
// not reach.
func (n *Network) startResolver(ctx context.Context, rec *canary.Recorder, log *slog.Logger) error {
	var allow []string
	if n.egress == "mirror-only" {
		allow = []string{canary.MirrorLabel}
	}
	resolver := canary.NewDNS(canary.DNSOptions{Recorder: rec, Logger: log, Mirror: mirrorIP, Filter: true, Allow: allow})
	s, err := canary.ServeDNS(ctx, net.JoinHostPort(n.plan.Gateway.String(), strconv.Itoa(dnsPort)), resolver, log)
	if err != nil {
		return fmt.Errorf("starting the resolver: %w", err)
	}
	n.canaries = append(n.canaries, s)
	return nil
}

// stopCanaries stops every canary started, returning all failures.
func (n *Network) stopCanaries(ctx context.Context) error {
	var errs []error
	for _, c := range n.canaries {
		if err := c.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	n.canaries = nil
	if n.neighbour != nil {
		if err := n.neighbour.close(ctx); err != nil {
			errs = append(errs, err)
		}
		n.neighbour = nil
	}
	return errors.Join(errs...)
}

// ECSAddr is where the ECS task-role credentials canary listens,
// "169.254.170.2:80".
func (n *Network) ECSAddr() string { return net.JoinHostPort(ecsIP.String(), "80") }

// AlibabaAddr is where the Alibaba Cloud metadata canary listens,
// "100.100.100.200:80".
func (n *Network) AlibabaAddr() string { return net.JoinHostPort(alibabaIP.String(), "80") }

// OutsideAddr is the harness-owned "outside" address holding the sinks
// (TCP on SinkTCPPorts, UDP on SinkUDPPorts).
func (n *Network) OutsideAddr() netip.Addr { return outsideIP }

// OtherResolverAddr is host:port of a DNS canary that is not the
// sandbox's configured resolver.
func (n *Network) OtherResolverAddr() string {
	return net.JoinHostPort(otherResolverIP.String(), strconv.Itoa(dnsPort))
}

// Ports of the other resolver's encrypted DNS.
const (
	DoTPort = 853
	DoHPort = 443
)

// DoTAddr is host:port of the other resolver's DNS over TLS.
func (n *Network) DoTAddr() string {
	return net.JoinHostPort(otherResolverIP.String(), strconv.Itoa(DoTPort))
}

// DoHAddr is host:port of the other resolver's DNS over HTTPS endpoint
// (canary.DoHPath).
func (n *Network) DoHAddr() string {
	return net.JoinHostPort(otherResolverIP.String(), strconv.Itoa(DoHPort))
}

// DNSAltAddr is the gateway's DNS canary on its alternate port.
func (n *Network) DNSAltAddr() string {
	return net.JoinHostPort(n.plan.Gateway.String(), strconv.Itoa(DNSAltPort))
}

// MirrorAddr is host:port of the package mirror, an HTTP sink that answers
// every request with "SANDCHECK-SINK package-mirror".
func (n *Network) MirrorAddr() string {
	return net.JoinHostPort(mirrorIP.String(), strconv.Itoa(MirrorPort))
}

// BrokerPort is the tool broker's port on the gateway.
const BrokerPort = 8090

// RoleBroker names the tool broker as a destination: the one a
// brokered-data-task profile allows (policies/rego/profiles.rego).
const RoleBroker = "tool-broker"

// BrokerAddr is host:port of the harness's tool broker (canary.Broker) on
// the gateway. It requires BrokerToken except under the open profile, where
// it stands for a careless platform's broker that serves anyone.
func (n *Network) BrokerAddr() string {
	return net.JoinHostPort(n.plan.Gateway.String(), strconv.Itoa(BrokerPort))
}

// BrokerToken is the run's broker token, the scoped credential the
// platform hands a brokered task.
func (n *Network) BrokerToken() string { return n.brokerToken }

// ToolBroker is the tool broker the network serves, for the engine to put
// the reference token broker beside it (canary.Broker.WithReference).
func (n *Network) ToolBroker() *canary.Broker { return n.toolBroker }

// ProxyPort is the egress proxy's port on the gateway.
const ProxyPort = 3128

// RoleProxy names the egress proxy as a destination: the one a
// mediated-browser profile allows (policies/rego/profiles.rego).
const RoleProxy = "browser-proxy"

// ProxyAddr is host:port of the harness's egress proxy (an HTTP CONNECT
// proxy, canary.Proxy) on the gateway. Sandboxes on the network find it in
// HTTP_PROXY and HTTPS_PROXY.
func (n *Network) ProxyAddr() string {
	return net.JoinHostPort(n.plan.Gateway.String(), strconv.Itoa(ProxyPort))
}

// owns reports whether a is an address the harness holds for the run.
func (n *Network) owns(a netip.Addr) bool { return slices.Contains(n.Owned(), a) }

// proxyAllows is the egress proxy's policy: under the open profile a
// careless platform's open proxy (every harness address); under any other
// the package mirror alone.
func (n *Network) proxyAllows(ap netip.AddrPort) bool {
	if n.egress == "" || n.egress == "open" {
		return true
	}
	return ap == netip.AddrPortFrom(mirrorIP, MirrorPort)
}

// GatewayAddr is the bridge gateway, the host's own side of the network,
// where a token-recording listener stands for host services on
// GatewayServicePorts.
func (n *Network) GatewayAddr() netip.Addr { return n.plan.Gateway }

// NeighbourAddr is the neighbour sandbox's address on the run's subnet,
// with listeners on NeighbourPorts.
func (n *Network) NeighbourAddr() netip.Addr { return neighbourAddr(n.plan) }

// Egress is the egress profile the network enforces.
func (n *Network) Egress() string { return n.egress }

// DNSZone is the zone the DNS canary answers.
func (n *Network) DNSZone() string { return canary.DefaultZone }

// Owned lists every address the harness holds for the run: the gateway,
// the metadata address and the outside addresses. Anything a sandbox
// reaches must be one of them (or its own loopback).
func (n *Network) Owned() []netip.Addr {
	owned := append([]netip.Addr{n.plan.Gateway, neighbourAddr(n.plan)}, hostAddrs()...)
	if n.v6 {
		owned = append(owned, metadataIP6, outsideIP6)
	}
	return owned
}

// Role names what a harness address stands for, for evidence: the
// destination a hit on that address proves the sandbox reached.
// local is host:port, or a bare address for a hit without ports (ICMP).
func (n *Network) Role(local string) string {
	ap, err := netip.ParseAddrPort(local)
	if err != nil {
		a, aerr := netip.ParseAddr(local)
		if aerr != nil {
			return ""
		}
		ap = netip.AddrPortFrom(a, 0)
	}
	switch ap.Addr() {
	case outsideIP:
		return RoleOutside
	case otherResolverIP:
		return RoleOtherResolver
	case neighbourAddr(n.plan):
		return RoleNeighbour
	case n.plan.Gateway:
		if slices.Contains(GatewayServicePorts, int(ap.Port())) {
			return RoleHostService
		}
		if ap.Port() == ProxyPort {
			return RoleProxy
		}
		if ap.Port() == BrokerPort {
			return RoleBroker
		}
		return RoleResolver
	case outsideIP6:
		return RoleOutside
	case metadataIP, ecsIP, alibabaIP, metadataIP6:
		return "metadata"
	case kubeAPIIP:
		return RoleKubeAPI
	case mirrorIP:
		return RolePackageMirror
	}
	return ""
}

// KubeAPIAddr is host:port of the Kubernetes API canary (HTTPS), where
// kubernetes.default.svc resolves through the DNS canary.
func (n *Network) KubeAPIAddr() string {
	return net.JoinHostPort(kubeAPIIP.String(), strconv.Itoa(KubeAPIPort))
}
