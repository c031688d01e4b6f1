package canary

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
)

// Running is one started listener of a canary service.
type Running interface {
	// Addr is where it listens.
	Addr() string
	// Close stops it, waiting for its handlers within ctx.
	Close(ctx context.Context) error
}

// Kit is what the listeners of one set of canaries share: the recorder
// every hit goes to and one handler per service, each made once, so a
// service listening on several addresses is one canary (the metadata
// canary's honeytokens are the same on every address). A nil handler
// leaves its service unservable.
type Kit struct {
	// Logger gets the listeners' debug lines; nil discards.
	Logger *slog.Logger
	// Metadata is the cloud metadata canary (also ECS and Alibaba Cloud).
	Metadata *Metadata
	// KubeAPI is the Kubernetes API canary.
	KubeAPI *KubeAPI
	// DNS is the DNS canary (also over TLS and HTTPS).
	DNS *DNS
	// Outside is the sink of "outside" addresses: TCP, UDP and ICMP.
	Outside *Sink
	// Mirror is the sink standing for the platform's package mirror.
	Mirror *Sink
	// HostService is the sink standing for the host's own services.
	HostService *Sink
	// Proxy is the platform's egress proxy.
	Proxy *Proxy
	// Broker is the platform's tool broker.
	Broker *Broker
}

// Service declares one canary service: `sandcheck run` starts each on the
// addresses of its harness network, `sandcheck canary serve` on the
// addresses its flag of the same name gives. Adding a canary is one entry
// here plus its implementation.
type Service struct {
	// Name is the service's name and canary serve's flag.
	Name string
	// Help says what it is, for the flag's help.
	Help string
	// Serve starts the service on one address (host:port, or a bare
	// address for ICMP) with the kit's handler.
	Serve func(ctx context.Context, k *Kit, addr string) (Running, error)
}

// Services is every canary service, declared once.
var Services = []Service{
	{Name: "metadata", Help: "the cloud metadata canary (AWS, GCP, Azure) over HTTP", Serve: httpService(func(k *Kit) http.Handler {
		if k.Metadata == nil {
			return nil
		}
		return k.Metadata
	}, nil)},
	{Name: "ecs", Help: "the ECS task-role credentials canary over HTTP", Serve: httpService(func(k *Kit) http.Handler {
		if k.Metadata == nil {
			return nil
		}
		return k.Metadata.ECS()
	}, nil)},
	{Name: "alibaba", Help: "the Alibaba Cloud metadata canary over HTTP", Serve: httpService(func(k *Kit) http.Handler {
		if k.Metadata == nil {
			return nil
		}
		return k.Metadata.Alibaba()
	}, nil)},
	{Name: "kube-api", Help: "the Kubernetes API canary over HTTPS", Serve: httpService(func(k *Kit) http.Handler {
		if k.KubeAPI == nil {
			return nil
		}
		return k.KubeAPI
	}, KubeAPIHostnames)},
	{Name: "dns", Help: "the DNS canary (UDP and TCP)", Serve: func(ctx context.Context, k *Kit, addr string) (Running, error) {
		if k.DNS == nil {
			return nil, unservable("dns")
		}
		return running(ServeDNS(ctx, addr, k.DNS, k.Logger))
	}},
	{Name: "dot", Help: "the DNS canary over TLS", Serve: func(ctx context.Context, k *Kit, addr string) (Running, error) {
		if k.DNS == nil {
			return nil, unservable("dot")
		}
		cfg, err := tlsFor(addr, nil)
		if err != nil {
			return nil, err
		}
		return running(ServeDoT(ctx, addr, k.DNS, cfg, k.Logger))
	}},
	{Name: "doh", Help: "the DNS canary over HTTPS, at " + DoHPath, Serve: httpService(func(k *Kit) http.Handler {
		if k.DNS == nil {
			return nil
		}
		return k.DNS.DoH()
	}, []string{})},
	{Name: "sink", Help: "a TCP sink of the outside (also answers HTTP)", Serve: sinkService("sink", func(k *Kit) *Sink { return k.Outside }, (*Sink).ServeTCP)},
	{Name: "udp-sink", Help: "a UDP sink of the outside", Serve: sinkService("udp-sink", func(k *Kit) *Sink { return k.Outside }, (*Sink).ServeUDP)},
	{Name: "icmp", Help: "the ICMP echo observer of an outside address (a bare address; needs CAP_NET_RAW)", Serve: sinkService("icmp", func(k *Kit) *Sink { return k.Outside }, (*Sink).ServeICMP)},
	{Name: "mirror", Help: "the package mirror, an HTTP sink", Serve: sinkService("mirror", func(k *Kit) *Sink { return k.Mirror }, (*Sink).ServeTCP)},
	{Name: "host-service", Help: "a TCP sink standing for a service of the host itself", Serve: sinkService("host-service", func(k *Kit) *Sink { return k.HostService }, (*Sink).ServeTCP)},
	{Name: "proxy", Help: "the egress proxy (HTTP CONNECT to the canaries' own addresses)", Serve: func(ctx context.Context, k *Kit, addr string) (Running, error) {
		if k.Proxy == nil {
			return nil, unservable("proxy")
		}
		return running(k.Proxy.Serve(ctx, addr))
	}},
	{Name: "broker", Help: "the tool broker over HTTP", Serve: httpService(func(k *Kit) http.Handler {
		if k.Broker == nil {
			return nil
		}
		return k.Broker
	}, nil)},
}

// ServiceNames are the names of Services, in order.
func ServiceNames() []string {
	out := make([]string, len(Services))
	for i, s := range Services {
		out[i] = s.Name
	}
	return out
}

// LookupService returns the declared service of that name.
func LookupService(name string) (Service, bool) {
	for _, s := range Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

func unservable(name string) error {
	return fmt.Errorf("canary %s: no handler for it in this set of canaries", name)
}

// httpService serves the handler the kit gives over HTTP, or over HTTPS
// with a certificate made for the listener's address (and names) when
// names is not nil.
func httpService(handler func(*Kit) http.Handler, names []string) func(context.Context, *Kit, string) (Running, error) {
	return func(ctx context.Context, k *Kit, addr string) (Running, error) {
		h := handler(k)
		if h == nil {
			return nil, fmt.Errorf("canary on %s: no handler for it in this set of canaries", addr)
		}
		if names == nil {
			return running(Serve(ctx, addr, h, k.Logger))
		}
		cfg, err := tlsFor(addr, names)
		if err != nil {
			return nil, err
		}
		return running(ServeTLS(ctx, addr, h, cfg, k.Logger))
	}
}

// sinkService serves one of the kit's sinks through one of its methods.
func sinkService(name string, sink func(*Kit) *Sink, serve func(*Sink, context.Context, string) (*Listener, error)) func(context.Context, *Kit, string) (Running, error) {
	return func(ctx context.Context, k *Kit, addr string) (Running, error) {
		s := sink(k)
		if s == nil {
			return nil, unservable(name)
		}
		return running(serve(s, ctx, addr))
	}
}

// tlsFor makes a TLS configuration for a listener on addr (host:port)
// with a certificate for its address and names.
func tlsFor(addr string, names []string) (*tls.Config, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("canary on %q: want an address and port: %w", addr, err)
	}
	return SelfSignedTLSNames([]netip.Addr{ap.Addr()}, names)
}

// running adapts a started server to Running.
func running[S interface {
	Close(context.Context) error
}](s S, err error) (Running, error) {
	if err != nil {
		return nil, err
	}
	if r, ok := any(s).(Running); ok {
		return r, nil
	}
	return runningServer{s}, nil
}

// runningServer is a server whose Addr may be a net.Addr.
type runningServer struct {
	s interface{ Close(context.Context) error }
}

func (r runningServer) Addr() string {
	switch a := r.s.(type) {
	case interface{ Addr() net.Addr }:
		return a.Addr().String()
	case interface{ Addr() string }:
		return a.Addr()
	}
	return ""
}

func (r runningServer) Close(ctx context.Context) error { return r.s.Close(ctx) }
