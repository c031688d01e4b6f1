package canary

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Encrypted DNS: the DNS canary's answers over TLS (DoT, RFC 7858) and
// HTTPS (DoH, RFC 8484), as a public resolver serves them to software that
// bypasses the configured one. Hits are ServiceDNS with Transport "dot" or
// "doh", so the same exfiltration names are recognised.
const (
	// DoHPath is where the DoH endpoint answers.
	DoHPath = "/dns-query"
	// dnsMessageType is the media type of a DNS message in DoH.
	dnsMessageType = "application/dns-message"
)

// SelfSignedTLS makes a TLS server configuration with a fresh ECDSA key and
// a certificate for ips, valid for a day: the harness's encrypted canaries
// need one, and no client is meant to trust it (hostile code does not check).
func SelfSignedTLS(ips []netip.Addr) (*tls.Config, error) {
	return SelfSignedTLSNames(ips, nil)
}

// SelfSignedTLSNames is SelfSignedTLS with DNS names in the certificate too
// (the Kubernetes API canary's service names).
func SelfSignedTLSNames(ips []netip.Addr, names []string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the canary's TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("drawing a certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "sandcheck canary"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		tmpl.DNSNames = append(tmpl.DNSNames, strings.TrimSuffix(n, "."))
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the canary's certificate: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
		// HTTP/1.1 only: the canary's HTTP server is not set up for h2.
		NextProtos: []string{"http/1.1", "dot"},
	}, nil
}

// DoTServer is the DNS canary over TLS on one address.
type DoTServer struct {
	addr string
	srv  *dns.Server
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// ServeDoT listens on addr (IPv4 host:port, 853 by convention) and answers
// DNS over TLS with d until Close. Connections are capped (MaxConns), the
// handshake and each query bounded by DNSTimeout.
func ServeDoT(ctx context.Context, addr string, d *DNS, cfg *tls.Config, logger *slog.Logger) (*DoTServer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s/tcp: %w", addr, err)
	}
	tl := tls.NewListener(&limitListener{Listener: ln, sem: make(chan struct{}, MaxConns)}, cfg)
	s := &DoTServer{addr: ln.Addr().String(), done: make(chan error, 1)}
	s.srv = &dns.Server{Listener: tl, Net: "tcp-tls", Handler: d.transportHandler("dot"),
		ReadTimeout: DNSTimeout, WriteTimeout: DNSTimeout, MaxTCPQueries: maxTCPQueries}
	started := make(chan struct{})
	s.srv.NotifyStartedFunc = func() { close(started) }
	go func() { s.done <- s.srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-s.done:
		ln.Close()
		return nil, fmt.Errorf("serving dns over tls on %s: %w", addr, err)
	}
	return s, nil
}

// Addr is the address served (with the port the kernel chose for port 0).
func (s *DoTServer) Addr() string { return s.addr }

// Close stops the listener, waiting for queries in flight until ctx ends.
// Calling it twice is safe.
func (s *DoTServer) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		if err := s.srv.ShutdownContext(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("stopping dns-over-tls canary on %s: %w", s.addr, err))
		}
		select {
		case <-s.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("waiting for dns-over-tls canary on %s: %w", s.addr, ctx.Err()))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// transportHandler answers as ServeDNS does, naming the transport.
func (d *DNS) transportHandler(transport string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		select {
		case d.inflight <- struct{}{}:
			defer func() { <-d.inflight }()
		default:
			return
		}
		resp, hit := d.Answer(req)
		hit.Remote, hit.Local, hit.Transport = w.RemoteAddr().String(), w.LocalAddr().String(), transport
		d.rec.Record(hit)
		if err := w.WriteMsg(resp); err != nil {
			d.log.Debug("dns canary: writing answer", "remote", hit.Remote, "transport", transport, "err", err)
		}
	})
}

// DoH returns the DNS canary as a DoH endpoint (RFC 8484): GET with a
// base64url "dns" parameter or POST of an application/dns-message body at
// DoHPath. Serve it over TLS with ServeTLS.
func (d *DNS) DoH() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != DoHPath {
			http.NotFound(w, r)
			return
		}
		var wire []byte
		var err error
		switch r.Method {
		case http.MethodGet:
			q := r.URL.Query().Get("dns")
			if len(q) > 2*dns.MinMsgSize {
				err = errors.New("dns parameter too long")
				break
			}
			wire, err = base64.RawURLEncoding.DecodeString(q)
		case http.MethodPost:
			if r.Header.Get("Content-Type") != dnsMessageType {
				http.Error(w, "want "+dnsMessageType, http.StatusUnsupportedMediaType)
				return
			}
			wire, err = io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
			if err == nil && len(wire) > MaxBodyBytes {
				err = errors.New("message too long")
			}
		default:
			http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
			return
		}
		req := new(dns.Msg)
		if err == nil {
			err = req.Unpack(wire)
		}
		if err != nil {
			http.Error(w, "malformed DNS message", http.StatusBadRequest)
			return
		}
		select {
		case d.inflight <- struct{}{}:
			defer func() { <-d.inflight }()
		default:
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		resp, hit := d.Answer(req)
		hit.Remote, hit.Transport = r.RemoteAddr, "doh"
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			hit.Local = la.String()
		}
		d.rec.Record(hit)
		out, err := resp.Pack()
		if err != nil {
			http.Error(w, "packing the answer", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", dnsMessageType)
		w.Write(out)
	})
}
