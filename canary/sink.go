package canary

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The line protocol of the plain sinks: a probe sends
// "SANDCHECK <token>/<probe-id>\n" (over TCP, or as one UDP datagram) and
// the sink answers "SANDCHECK-SINK <role>\n". A TCP client that speaks HTTP
// instead is answered as HTTP, with attribution read as the metadata canary
// reads it.
const (
	SinkHello = "SANDCHECK "
	SinkReply = "SANDCHECK-SINK "
	// RedirectPath on an HTTP sink answers 302 to the sink's RedirectTo.
	RedirectPath = "/redirect"
)

// Bounds of the sinks.
const (
	// SinkTimeout bounds one TCP connection from accept to close.
	SinkTimeout = 5 * time.Second
	// maxSinkRead bounds what a sink reads of one connection or datagram.
	maxSinkRead = MaxHeaderBytes
)

// SinkOptions configures a Sink.
type SinkOptions struct {
	// Recorder receives a hit for every connection and datagram; required.
	Recorder *Recorder
	// Logger gets debug lines; nil discards.
	Logger *slog.Logger
	// Role names what the sink stands for ("outside"); it is echoed to
	// clients so a probe can tell the sink from anything else listening.
	Role string
	// RedirectTo, if set, is where GET RedirectPath on an HTTP connection is
	// redirected (an allowed host that redirects to the metadata address).
	RedirectTo string
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// Sink records whatever reaches a harness-owned "outside" address: it
// proves egress, with the token of the probe that sent it.
type Sink struct {
	rec        *Recorder
	log        *slog.Logger
	role       string
	redirectTo string
	now        func() time.Time
}

// NewSink returns a Sink.
func NewSink(opts SinkOptions) *Sink {
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Role == "" {
		opts.Role = "outside"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Sink{rec: opts.Recorder, log: opts.Logger, role: opts.Role, redirectTo: opts.RedirectTo, now: opts.Now}
}

// Listener is one sink socket (TCP or UDP) serving until Close.
type Listener struct {
	addr  net.Addr
	close func() error
	wg    sync.WaitGroup

	once sync.Once
	err  error
}

// Addr is the address listened on.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops the listener and waits for its connections, which are
// bounded by SinkTimeout, until ctx ends. Calling it twice is safe.
func (l *Listener) Close(ctx context.Context) error {
	l.once.Do(func() {
		l.err = l.close()
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			l.err = errors.Join(l.err, fmt.Errorf("waiting for sink connections on %s: %w", l.addr, ctx.Err()))
		}
	})
	return l.err
}

// ServeTCP listens on addr (IPv4 host:port, or [IPv6]:port) and records
// every connection.
func (s *Sink) ServeTCP(ctx context.Context, addr string) (*Listener, error) {
	return serveConns(ctx, tcpNet(addr), addr, s.serveConn)
}

// serveConns listens on addr and hands each connection, at most MaxConns at
// once, to serve in its own goroutine, closing it afterwards; closing the
// Listener waits for them.
func serveConns(ctx context.Context, network, addr string, serve func(net.Conn)) (*Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s/tcp: %w", addr, err)
	}
	lim := &limitListener{Listener: ln, sem: make(chan struct{}, MaxConns)}
	l := &Listener{addr: ln.Addr(), close: ln.Close}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := lim.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l, nil
}

// serveConn reads the client's first words within SinkTimeout, records the
// hit and answers in the client's protocol.
func (s *Sink) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(SinkTimeout))
	hit := Hit{Time: s.now().UTC(), Service: ServiceTCP, Method: "CONNECT", Remote: c.RemoteAddr().String(),
		Local: c.LocalAddr().String(), Transport: "tcp"}
	br := bufio.NewReaderSize(io.LimitReader(c, maxSinkRead), 1024)
	head, _ := br.Peek(8)
	if looksHTTP(head) {
		s.serveHTTP(c, br, hit)
		return
	}
	line, _ := br.ReadSlice('\n')
	hit.Token, hit.Probe = parseHello(line)
	hit.Via = helloVia(line)
	if hit.Token != "" {
		hit.Method = "HELLO"
	}
	s.rec.Record(hit)
	io.WriteString(c, SinkReply+s.role+"\n")
}

// serveHTTP answers one HTTP request: RedirectPath redirects, anything
// else gets a short 200 naming the role.
func (s *Sink) serveHTTP(c net.Conn, br *bufio.Reader, hit Hit) {
	hit.Service = ServiceHTTP
	req, err := http.ReadRequest(br)
	if err != nil {
		hit.Method, hit.Status = "BADREQUEST", http.StatusBadRequest
		s.rec.Record(hit)
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	if isWebSocket(req) {
		s.serveWebSocket(c, br, req, hit)
		return
	}
	hit.Method, hit.Path, hit.Agent = clip(req.Method), clip(req.URL.RequestURI()), clip(req.UserAgent())
	hit.Token, hit.Probe = attribute(req)
	hit.Via = attributedVia(req)
	status, body, extra := http.StatusOK, SinkReply+s.role+"\n", ""
	if req.URL.Path == RedirectPath && s.redirectTo != "" {
		status, body, extra = http.StatusFound, "", "Location: "+s.redirectTo+"\r\n"
	}
	hit.Status = status
	s.rec.Record(hit)
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), extra, strconv.Itoa(len(body)), body)
}

// looksHTTP reports whether a connection opens with an HTTP method.
func looksHTTP(head []byte) bool {
	for _, m := range []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "CONNECT ", "PATCH "} {
		if bytes.HasPrefix(head, []byte(m)) {
			return true
		}
	}
	return false
}

// parseHello reads "SANDCHECK <token>/<probe-id>"; anything else carries no
// attribution.
func parseHello(b []byte) (token, probe string) {
	rest, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), SinkHello)
	if !ok {
		return "", ""
	}
	return splitAttribution(strings.TrimSpace(rest))
}

// helloVia is the path a hello line names (Hit.Via).
func helloVia(b []byte) string {
	rest, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), SinkHello)
	if !ok {
		return ""
	}
	_, _, via := splitVia(strings.TrimSpace(rest))
	return via
}

// ServeUDP listens on addr (IPv4 host:port), records every datagram and
// answers each with the sink reply. One goroutine serves the socket, so a
// flood costs the host no more than one datagram at a time.
func (s *Sink) ServeUDP(ctx context.Context, addr string) (*Listener, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s/udp: %w", addr, err)
	}
	l := &Listener{addr: pc.LocalAddr(), close: pc.Close}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, maxSinkRead)
		for failures := 0; failures < 100; {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				failures++ // a socket that keeps failing is given up, not spun on
				continue
			}
			failures = 0
			line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
			hit := Hit{Time: s.now().UTC(), Service: ServiceUDP, Method: "DATAGRAM", Remote: from.String(),
				Local: pc.LocalAddr().String(), Transport: "udp"}
			hit.Token, hit.Probe = parseHello(line)
			if hit.Token != "" {
				hit.Method = "HELLO"
			}
			s.rec.Record(hit)
			pc.SetWriteDeadline(time.Now().Add(time.Second))
			pc.WriteTo([]byte(SinkReply+s.role+"\n"), from)
		}
	}()
	return l, nil
}
