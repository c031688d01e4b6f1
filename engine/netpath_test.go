package engine

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
)

// loopDialer stands for a sandbox's namespace with the test's own loopback:
// the attempts' reading of what answers is what is under test (the
// namespace entry itself is internal/netns's test).
type loopDialer struct{ err error }

func (d loopDialer) DialFromSandbox(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
	if d.err != nil {
		return nil, d.err
	}
	return nd.DialContext(ctx, network, addr)
}

func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				handle(c)
			}()
		}
	}()
	return l.Addr().String()
}

// closedAddr is a loopback port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func TestTryPathTCP(t *testing.T) {
	open := serve(t, func(net.Conn) {})
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "tcp", addr: open}); !r.open || r.unknown {
		t.Errorf("a listening address: %+v, want open", r)
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "tcp", addr: closedAddr(t)}); r.open || r.unknown || r.how != "refused" {
		t.Errorf("a closed port: %+v, want closed, refused", r)
	}
	// A namespace the host could not enter is no fact either way.
	if r := tryPath(context.Background(), loopDialer{err: errors.New("sandbox has no running init")}, &ownDials{}, pathTry{how: "tcp", addr: open}); !r.unknown || r.open {
		t.Errorf("no namespace: %+v, want unknown", r)
	}
}

func TestTryPathTimeoutIsClosed(t *testing.T) {
	// A listener that takes the connection and never answers: the attempt
	// ends at its bound and is no fact either way (a slow resolver may yet
	// have let it through), never a confirmation.
	silent := serve(t, func(c net.Conn) { time.Sleep(3 * time.Second) })
	start := time.Now()
	r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "dns-tcp", addr: silent, target: "sandcheck.test"})
	if r.open || !r.unknown || !strings.Contains(r.how, "no answer") {
		t.Errorf("a silent resolver: %+v, want unknown, no answer", r)
	}
	if d := time.Since(start); d > netpathTimeout+time.Second {
		t.Errorf("the attempt took %s, past its bound %s", d, netpathTimeout)
	}
}

func TestTryPathDNS(t *testing.T) {
	answer := func(rcode int, withA bool) string {
		mux := dns.NewServeMux()
		mux.HandleFunc(".", func(w dns.ResponseWriter, req *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(req, rcode)
			if withA {
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(198, 51, 100, 10)}}
			}
			w.WriteMsg(m)
		})
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &dns.Server{Listener: l, Handler: mux}
		go srv.ActivateAndServe()
		t.Cleanup(func() { srv.Shutdown() })
		return l.Addr().String()
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "dns-tcp", addr: answer(dns.RcodeSuccess, true), target: canary.DefaultZone}); !r.open {
		t.Errorf("a resolver that answers the zone: %+v, want open", r)
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "dns-tcp", addr: answer(dns.RcodeRefused, false), target: canary.DefaultZone}); r.open || r.unknown || !strings.Contains(r.how, "REFUSED") {
		t.Errorf("a filtering resolver: %+v, want closed, REFUSED", r)
	}
}

func TestTryPathProxyAndBroker(t *testing.T) {
	status := func(code int) string {
		return serve(t, func(c net.Conn) {
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			if req.Method == http.MethodGet && (req.URL.Path != canary.BrokerPath || req.Header.Get("Authorization") != "") {
				code = http.StatusBadRequest // not the tokenless query the probe makes
			}
			(&http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1}).Write(c)
		})
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "connect", addr: status(200), target: "198.51.100.10:443"}); !r.open {
		t.Errorf("a proxy granting the tunnel: %+v, want open", r)
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "connect", addr: status(403), target: "198.51.100.10:443"}); r.open || r.how != "answered 403" {
		t.Errorf("a proxy refusing the tunnel: %+v, want closed, answered 403", r)
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "broker-no-token", addr: status(200)}); !r.open {
		t.Errorf("a broker serving a tokenless call: %+v, want open", r)
	}
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "broker-no-token", addr: status(401)}); r.open || r.how != "answered 401" {
		t.Errorf("a broker refusing a tokenless call: %+v, want closed", r)
	}
	garbage := serve(t, func(c net.Conn) { c.Write([]byte(strings.Repeat("A", 4096))) })
	if r := tryPath(context.Background(), loopDialer{}, &ownDials{}, pathTry{how: "connect", addr: garbage, target: "198.51.100.10:443"}); r.open || r.unknown {
		t.Errorf("something that is no proxy: %+v, want closed", r)
	}
}

// The hits the host's own attempts cause go out as netpath-hit, from the
// port the attempt was bound to before it connected; the sandbox's own
// (another port, or carrying a probe's token) stay canary-hit.
func TestOwnAttemptHitsAreTheHosts(t *testing.T) {
	remotes := make(chan string, 1)
	addr := serve(t, func(c net.Conn) { remotes <- c.RemoteAddr().String() })
	e := &Engine{}
	if r := tryPath(context.Background(), loopDialer{}, &e.own, pathTry{how: "tcp", addr: addr}); !r.open {
		t.Fatalf("attempt: %+v", r)
	}
	remote := <-remotes
	if got := e.hitEvent(canary.Hit{Remote: remote}); got != "netpath-hit" {
		t.Errorf("the host's own attempt from %s streams as %s, want netpath-hit", remote, got)
	}
	if got := e.hitEvent(canary.Hit{Remote: remote, Probe: "egress.tcp-ports", Token: "t"}); got != "canary-hit" {
		t.Errorf("a hit with a probe's token streams as %s, want canary-hit", got)
	}
	other, _ := net.Dial("tcp4", addr)
	other.Close()
	if got := e.hitEvent(canary.Hit{Remote: <-remotes}); got != "canary-hit" {
		t.Errorf("a connection the host did not make for a path streams as %s, want canary-hit", got)
	}
}

// A path kind's fact: any attempt through is open (and indicates nothing:
// a path is no escape); every attempt refused or unreachable is closed,
// confirming blocked only where the attempts are the probe's own
// transport; an attempt that could not tell leaves it unknown.
func TestPathFact(t *testing.T) {
	p := probes.Params{OutsideAddr: "198.51.100.10"}
	tries := netpathChecks["netpath:outside"].tries(p)
	if len(tries) != len(netharness.SinkTCPPorts) {
		t.Fatalf("netpath:outside tries %v, want every sink port", tries)
	}
	all := func(r pathDial) map[string]pathDial {
		m := map[string]pathDial{}
		for _, tr := range tries {
			m[tr.String()] = r
		}
		return m
	}
	closed := all(pathDial{how: "refused"})
	if it := pathFact("netpath:outside", netpathChecks["netpath:outside"], tries, closed); it.Kind != "netpath-closed" || it.Indicates != probes.Blocked || it.Source != evidence.SourceRuntime {
		t.Errorf("all refused (TCP probe): %+v, want runtime/netpath-closed indicating blocked", it)
	}
	if it := pathFact("netpath:outside-route", netpathChecks["netpath:outside-route"], tries, closed); it.Kind != "netpath-closed" || it.Indicates != "" {
		t.Errorf("all refused (a UDP/ICMP probe's route): %+v, want netpath-closed indicating nothing", it)
	}
	one := all(pathDial{how: "refused"})
	one[tries[3].String()] = pathDial{open: true, how: "connected"}
	it := pathFact("netpath:outside", netpathChecks["netpath:outside"], tries, one)
	if it.Kind != "netpath-open" || it.Indicates != "" || !strings.Contains(it.Data["open"], tries[3].addr) || !strings.Contains(it.Summary, tries[3].addr) {
		t.Errorf("one port open: %+v, want netpath-open naming %s", it, tries[3].addr)
	}
	unk := all(pathDial{how: "refused"})
	unk[tries[0].String()] = pathDial{unknown: true, how: "no namespace"}
	if it := pathFact("netpath:outside", netpathChecks["netpath:outside"], tries, unk); it.Kind != "netpath-unknown" || it.Indicates != "" {
		t.Errorf("one attempt could not tell: %+v, want netpath-unknown", it)
	}
	if it := pathFact("netpath:outside", netpathChecks["netpath:outside"], tries, map[string]pathDial{}); it.Kind != "netpath-unknown" {
		t.Errorf("nothing tried: %+v, want netpath-unknown", it)
	}
}

// Only addresses the harness holds are ever tried; with no harness network
// nothing is.
func TestNetpathAllowedNeedsTheHarness(t *testing.T) {
	e := &Engine{}
	for _, tr := range []pathTry{{how: "tcp", addr: "198.51.100.10:80"}, {how: "tcp", addr: "169.254.169.254:80"}, {how: "connect", addr: "198.51.100.10:3128", target: "169.254.169.254:80"}} {
		if e.netpathAllowed(tr) {
			t.Errorf("%s allowed with no harness network", tr)
		}
	}
}
