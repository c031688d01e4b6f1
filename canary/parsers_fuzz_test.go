package canary

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// FuzzProxyRequest: whatever a client sends the egress proxy canary, it
// answers with an HTTP status line and records one hit, never dialling (no
// address is owned here) and never panicking. The client is on loopback and
// half-closes after its bytes, so an incomplete request ends at once.
func FuzzProxyRequest(f *testing.F) {
	f.Add([]byte("CONNECT 198.51.100.10:443 HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nUser-Agent: sandcheck tok/egress.proxy\r\n\r\n"))
	f.Add([]byte("CONNECT [::1]:80 HTTP/1.0\r\n\r\n"))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		var hits int
		rec := NewRecorder(4, func(Hit) { hits++ })
		p := NewProxy(ProxyOptions{Recorder: rec, Owned: func(netip.Addr) bool { return false }})
		client, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); p.serveConn(server); server.Close() }()
		client.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := client.Write(b); err == nil {
			client.(*net.TCPConn).CloseWrite()
		}
		reply, _ := bufio.NewReader(io.LimitReader(client, 4096)).ReadString('\n')
		<-done
		if len(reply) < 12 || reply[:5] != "HTTP/" {
			t.Fatalf("reply %q", reply)
		}
		if hits != 1 {
			t.Fatalf("%d hits", hits)
		}
	})
}

// FuzzMetadataRequest: any request the HTTP server would hand the metadata
// canary gets a response, never a panic.
func FuzzMetadataRequest(f *testing.F) {
	f.Add([]byte("GET /latest/meta-data/iam/security-credentials/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"))
	f.Add([]byte("PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n"))
	f.Add([]byte("GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.1\r\nHost: metadata.google.internal\r\nMetadata-Flavor: Google\r\n\r\n"))
	m := NewMetadata(MetadataOptions{Recorder: NewRecorder(16, nil)})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		m.ServeHTTP(w, req)
		if w.Code < 100 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
	})
}

// FuzzSinkHello: the sink's attribution line parser never panics and never
// attributes without the hello prefix.
func FuzzSinkHello(f *testing.F) {
	f.Add([]byte(SinkHello + " tok/egress.tcp-ports\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		token, probe := parseHello(b)
		if (token != "" || probe != "") && !bytes.HasPrefix(b, []byte(SinkHello)) {
			t.Fatalf("attributed %q/%q without the hello", token, probe)
		}
		_ = looksHTTP(b)
	})
}
