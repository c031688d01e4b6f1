package canary

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// ServiceProxy is the harness's CONNECT proxy: Method is the request's
// method, Path its target, Status the proxy's answer (200 tunnelled, 403
// refused by policy).
const ServiceProxy = "egress-proxy"

// Bounds of a proxied tunnel.
const (
	// ProxyTunnelTimeout bounds one tunnel from CONNECT to close.
	ProxyTunnelTimeout = 10 * time.Second
	// maxTunnelBytes bounds what a tunnel carries each way.
	maxTunnelBytes = 64 << 10
)

// ProxyOptions configures a Proxy.
type ProxyOptions struct {
	// Recorder receives a hit for every request; required.
	Recorder *Recorder
	// Logger gets debug lines; nil discards.
	Logger *slog.Logger
	// Owned reports whether the harness holds an address: the proxy never
	// dials anything else, whatever Allow says. Required.
	Owned func(netip.Addr) bool
	// Allow reports whether policy lets a client tunnel to a destination;
	// nil allows every owned destination (an open proxy).
	Allow func(netip.AddrPort) bool
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Proxy is an HTTP CONNECT proxy standing for a platform's egress proxy.
// Targets must be literal IPv4 address:port (it never resolves a name) and
// owned by the harness; Allow decides among them.
type Proxy struct {
	opts ProxyOptions
}

// NewProxy returns a Proxy.
func NewProxy(opts ProxyOptions) *Proxy {
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Owned == nil {
		opts.Owned = func(netip.Addr) bool { return false }
	}
	if opts.Allow == nil {
		opts.Allow = func(netip.AddrPort) bool { return true }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Proxy{opts: opts}
}

// Serve listens on addr (IPv4 host:port) until the Listener is closed.
func (p *Proxy) Serve(ctx context.Context, addr string) (*Listener, error) {
	return serveConns(ctx, "tcp4", addr, p.serveConn)
}

// serveConn handles one client: one request, then, for an allowed CONNECT,
// a bounded tunnel.
func (p *Proxy) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(ReadHeaderTimeout))
	hit := Hit{Time: p.opts.Now().UTC(), Service: ServiceProxy, Remote: c.RemoteAddr().String(), Local: c.LocalAddr().String(), Transport: "tcp"}
	br := bufio.NewReaderSize(io.LimitReader(c, MaxHeaderBytes), 1024)
	req, err := http.ReadRequest(br)
	if err != nil {
		hit.Method, hit.Status = "BADREQUEST", http.StatusBadRequest
		p.opts.Recorder.Record(hit)
		proxyReply(c, http.StatusBadRequest)
		return
	}
	hit.Method, hit.Path, hit.Agent = clip(req.Method), clip(req.RequestURI), clip(req.UserAgent())
	hit.Token, hit.Probe = attribute(req)
	if req.Method != http.MethodConnect {
		hit.Status = http.StatusMethodNotAllowed
		p.opts.Recorder.Record(hit)
		proxyReply(c, hit.Status)
		return
	}
	target, err := netip.ParseAddrPort(req.RequestURI)
	if err != nil || !target.Addr().Is4() || !p.opts.Owned(target.Addr()) || !p.opts.Allow(target) {
		hit.Status = http.StatusForbidden
		p.opts.Recorder.Record(hit)
		proxyReply(c, hit.Status)
		return
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	up, err := d.Dial("tcp4", target.String())
	if err != nil {
		hit.Status = http.StatusBadGateway
		p.opts.Recorder.Record(hit)
		proxyReply(c, hit.Status)
		return
	}
	defer up.Close()
	hit.Status = http.StatusOK
	p.opts.Recorder.Record(hit)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	deadline := time.Now().Add(ProxyTunnelTimeout)
	c.SetDeadline(deadline)
	up.SetDeadline(deadline)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// What the client sent after its request and is still buffered
		// goes first.
		io.CopyN(up, io.MultiReader(br, c), maxTunnelBytes)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	io.CopyN(c, up, maxTunnelBytes)
	c.Close()
	wg.Wait()
}

func proxyReply(c net.Conn, status int) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, http.StatusText(status))
}
