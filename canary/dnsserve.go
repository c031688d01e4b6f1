package canary

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/miekg/dns"
)

// DNSServer serves a DNS canary over UDP and TCP on one address.
type DNSServer struct {
	addr    string
	servers []*dns.Server
	done    []chan error

	closeOnce sync.Once
	closeErr  error
}

// ServeDNS listens on addr (IPv4 host:port) over UDP and TCP and answers
// with d until Close. TCP connections are capped (MaxConns), each bounded
// in time and queries. ctx bounds only the listening.
func ServeDNS(ctx context.Context, addr string, d *DNS, logger *slog.Logger) (*DNSServer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s/udp: %w", addr, err)
	}
	ln, err := lc.Listen(ctx, "tcp4", addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("listening on %s/tcp: %w", addr, err)
	}
	s := &DNSServer{addr: addr}
	for _, srv := range []*dns.Server{
		{PacketConn: pc, Net: "udp", Handler: d, UDPSize: dns.MinMsgSize},
		{Listener: &limitListener{Listener: ln, sem: make(chan struct{}, MaxConns)}, Net: "tcp", Handler: d,
			ReadTimeout: DNSTimeout, WriteTimeout: DNSTimeout, MaxTCPQueries: maxTCPQueries},
	} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan error, 1)
		go func() { done <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-done:
			done <- err
		}
		s.servers = append(s.servers, srv)
		s.done = append(s.done, done)
	}
	return s, nil
}

// Addr is the address served (the same for UDP and TCP).
func (s *DNSServer) Addr() string { return s.addr }

// Close stops both listeners, waiting for queries in flight until ctx ends.
// Calling it twice is safe.
func (s *DNSServer) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		for i, srv := range s.servers {
			if err := srv.ShutdownContext(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("stopping dns canary on %s/%s: %w", s.addr, srv.Net, err))
			}
			select {
			case <-s.done[i]:
			case <-ctx.Done():
				errs = append(errs, fmt.Errorf("waiting for dns canary on %s/%s: %w", s.addr, srv.Net, ctx.Err()))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
