package impl

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// fakeProxy is an HTTP proxy on loopback standing for a wrapper's: it
// relays nothing anywhere, it answers as the canaries behind a permissive
// proxy would (allow) or refuses as a filtering one does, and records the
// requests it got.
type fakeProxy struct {
	ln          net.Listener
	allow       bool
	connectOnly bool // refuses the GET, tunnels the CONNECT
	mu          sync.Mutex
	reqs        []string
}

func newFakeProxy(t *testing.T, allow, connectOnly bool) *fakeProxy {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakeProxy{ln: ln, allow: allow, connectOnly: connectOnly}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 { // bounded: the probes make at most a few requests
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fp.serve(c)
		}
	}()
	return fp
}

func (fp *fakeProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	fp.mu.Lock()
	fp.reqs = append(fp.reqs, fmt.Sprintf("%s %s auth=%s token=%s", req.Method, req.RequestURI, req.Header.Get("Proxy-Authorization"), req.Header.Get("X-Sandcheck-Token")))
	fp.mu.Unlock()
	if !fp.allow || fp.connectOnly && req.Method != http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	switch {
	case req.Method == http.MethodConnect && strings.HasSuffix(req.RequestURI, ":443"):
		fmt.Fprint(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
		if line, err := br.ReadString('\n'); err == nil && strings.HasPrefix(line, sinkHello) {
			fmt.Fprint(c, sinkReply+"ok\n")
		}
	case req.Method == http.MethodConnect:
		fmt.Fprint(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
		if _, err := http.ReadRequest(br); err == nil {
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrole\n")
		}
	case strings.Contains(req.RequestURI, imdsCredsPath):
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrole\n")
	default:
		body := sinkReply + "web\n"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (fp *fakeProxy) requests() []string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return append([]string(nil), fp.reqs...)
}

// setProxyEnv leaves only the given proxy variables set.
func setProxyEnv(t *testing.T, kv map[string]string) {
	t.Helper()
	for _, k := range proxyEnv {
		t.Setenv(k, kv[k])
	}
}

func TestWrapperProxyProbes(t *testing.T) {
	p := probes.Params{Token: "sctok", OutsideAddr: "198.51.100.10", MetadataAddr: "169.254.169.254:80", WrapperProxy: true}
	for _, tc := range []struct {
		allow, connectOnly bool
		want               probes.Outcome
	}{{true, false, probes.Escaped}, {true, true, probes.Escaped}, {false, false, probes.Blocked}} {
		for id, f := range map[string]Func{"egress.wrapper-proxy-ip": wrapperProxyIP, "metadata.wrapper-proxy": wrapperProxyMetadata} {
			t.Run(fmt.Sprintf("%s/allow=%t/connect-only=%t", id, tc.allow, tc.connectOnly), func(t *testing.T) {
				fp := newFakeProxy(t, tc.allow, tc.connectOnly)
				setProxyEnv(t, map[string]string{"HTTPS_PROXY": "http://srt.user:s3cret@localhost:" + portOf(fp.ln.Addr())})
				p := p
				p.WrapperProxies = []string{"http://127.0.0.1:" + portOf(fp.ln.Addr())}
				r := f(t.Context(), p)
				if r.Outcome != tc.want {
					t.Fatalf("outcome %s (%s, %v), want %s", r.Outcome, r.Detail, r.Evidence, tc.want)
				}
				reqs := fp.requests()
				if len(reqs) == 0 {
					t.Fatal("the proxy got no request")
				}
				auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("srt.user:s3cret"))
				for _, q := range reqs {
					if !strings.Contains(q, "auth="+auth) || !strings.Contains(q, "token=sctok/"+id) {
						t.Errorf("request %q lacks the proxy's credentials or the probe's token", q)
					}
				}
				if (!tc.allow || tc.connectOnly) && len(reqs) != 2 {
					t.Errorf("a proxy refusing the GET got %v, want a GET and a CONNECT", reqs)
				}
				if tc.connectOnly && !strings.Contains(r.Detail, "tunnelled") {
					t.Errorf("detail %q: want the escape through the tunnel", r.Detail)
				}
			})
		}
	}
}

// A proxy the box names off loopback is never dialled; no proxy at all is
// no proxy path (blocked) unless the target says the wrapper has one.
func TestWrapperProxyNotUsed(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := probes.Params{Token: "sctok", OutsideAddr: "198.51.100.10"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		declare bool
		want    probes.Outcome
	}{
		{"none", nil, false, probes.Blocked},
		{"harness-proxy", map[string]string{"HTTP_PROXY": "http://" + ln.Addr().String()}, false, probes.Blocked},
		{"none-declared", nil, true, probes.Inconclusive},
		// 0.0.0.0 is no loopback address to the check, and were it dialled
		// by mistake the connection would stay on this machine.
		{"off-loopback", map[string]string{"HTTP_PROXY": "http://0.0.0.0:" + portOf(ln.Addr())}, false, probes.Inconclusive},
		{"socks-only", map[string]string{"ALL_PROXY": "socks5h://localhost:1080"}, true, probes.Inconclusive},
		// A loopback proxy the target does not declare is the box's word
		// alone: never dialled.
		{"undeclared", map[string]string{"HTTP_PROXY": "http://localhost:" + portOf(ln.Addr())}, false, probes.Blocked},
		{"undeclared-wrapper", map[string]string{"HTTP_PROXY": "http://localhost:" + portOf(ln.Addr())}, true, probes.Inconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setProxyEnv(t, tc.env)
			q := p
			q.WrapperProxy = tc.declare
			q.ProxyAddr = ln.Addr().String() // the harness's own, not the wrapper's
			for _, f := range []Func{wrapperProxyIP, wrapperProxyMetadata} {
				r := f(t.Context(), q)
				if r.Outcome != tc.want || r.Evidence["sent"] != "false" {
					t.Errorf("outcome %s sent=%q (%s), want %s with nothing sent", r.Outcome, r.Evidence["sent"], r.Detail, tc.want)
				}
			}
		})
	}
}

func TestParseBoxProxy(t *testing.T) {
	for _, tc := range []struct {
		in, addr string
		ok       bool
	}{
		{"http://localhost:3128", "127.0.0.1:3128", true},
		{"http://u:p@127.0.0.1:3128", "127.0.0.1:3128", true},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://127.0.0.1", "", false},
		{"https://localhost:3128", "", false},
		{"http://10.0.0.1:3128", "", false},
		{"http://proxy.example:3128", "", false},
		{"socks5://localhost:1080", "", false},
	} {
		bp, err := parseBoxProxy(tc.in)
		if (err == nil) != tc.ok || bp.addr != tc.addr {
			t.Errorf("parseBoxProxy(%q) = %q, %v; want %q ok=%t", tc.in, bp.addr, err, tc.addr, tc.ok)
		}
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}
