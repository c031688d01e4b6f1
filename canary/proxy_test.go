package canary

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// TestProxyConnect: an allowed, owned target is tunnelled (the hello
// reaches the sink behind it); an owned target policy refuses, a target
// the harness does not own, a name and a plain GET are refused, each
// recorded with the client's token and the status.
func TestProxyConnect(t *testing.T) {
	rec := NewRecorder(0, nil)
	sink := serveSink(t, NewSink(SinkOptions{Recorder: rec}), false)
	allowed := netip.MustParseAddrPort(sink.Addr().String())
	px := NewProxy(ProxyOptions{Recorder: rec,
		Owned: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") },
		Allow: func(ap netip.AddrPort) bool { return ap == allowed }})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	l, err := px.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })

	ask := func(method, target, token string) (int, net.Conn) {
		t.Helper()
		c, err := net.DialTimeout("tcp4", l.Addr().String(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nX-Sandcheck-Token: %s/egress.test\r\n\r\n", method, target, target, token)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		return resp.StatusCode, c
	}
	status, c := ask("CONNECT", allowed.String(), "tokpx1")
	if status != 200 {
		t.Fatalf("CONNECT to the allowed sink: %d", status)
	}
	io.WriteString(c, SinkHello+"tokpx1/egress.tunnel\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != SinkReply+"outside\n" {
		t.Errorf("through the tunnel: %q", line)
	}
	var services []string
	for _, h := range rec.ByToken("tokpx1") {
		services = append(services, h.Service+" "+fmt.Sprint(h.Status))
	}
	if len(services) != 2 || services[0] != ServiceProxy+" 200" || services[1] != ServiceTCP+" 0" {
		t.Errorf("hits with the token: %v, want the proxy's 200 then the sink's", services)
	}
	for i, tc := range []struct{ method, target string }{
		{"CONNECT", "127.0.0.1:1"},      // owned, not allowed
		{"CONNECT", "192.0.2.1:443"},    // not the harness's
		{"CONNECT", "example.test:443"}, // a name: never resolved
		{"GET", "http://" + allowed.String() + "/"},
	} {
		token := fmt.Sprintf("tokpxbad%d", i)
		status, c := ask(tc.method, tc.target, token)
		c.Close()
		want := http.StatusForbidden
		if tc.method != "CONNECT" {
			want = http.StatusMethodNotAllowed
		}
		if status != want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.target, status, want)
		}
		if hits := rec.ByToken(token); len(hits) != 1 || hits[0].Service != ServiceProxy || hits[0].Status != want {
			t.Errorf("%s %s: hits %+v", tc.method, tc.target, hits)
		}
	}
}
