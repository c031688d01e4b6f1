package canary

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveLoopback runs m on an ephemeral loopback port for the test.
func serveLoopback(t *testing.T, m *Metadata) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Serve(ctx, "127.0.0.1:0", m, nil)
	if err != nil {
		t.Fatalf("serving on loopback: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing server: %v", err)
		}
	})
	return s
}

// raw writes req on a fresh connection and returns the status line.
func raw(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, req)
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadString('\n')
	if err != nil {
		t.Fatalf("reading status line: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestServeRealClient(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	s := serveLoopback(t, m)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+s.Addr().String()+"/latest/meta-data/iam/security-credentials/", nil)
	req.Header.Set("User-Agent", "sandcheck-probe/net1/metadata.aws-imdsv1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET over TCP: %v", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != m.Honey().AWS.RoleName {
		t.Fatalf("GET over TCP = %d %q", resp.StatusCode, body)
	}
	hits := m.Recorder().ByToken("net1")
	if len(hits) != 1 || !strings.HasPrefix(hits[0].Remote, "127.0.0.1:") {
		t.Errorf("hits = %+v, want one from 127.0.0.1", hits)
	}
}

func TestServeOversizedHeader(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	s := serveLoopback(t, m)
	req := "GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 2*MaxHeaderBytes) + "\r\n\r\n"
	if got := raw(t, s.Addr().String(), req); !strings.Contains(got, " 431 ") {
		t.Errorf("oversized header answered %q, want 431", got)
	}
	if n := len(m.Recorder().Hits()); n != 0 {
		t.Errorf("recorded %d hits for a request refused before the handler", n)
	}
}

func TestServeMalformedRequest(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	s := serveLoopback(t, m)
	if got := raw(t, s.Addr().String(), "\x00\x01garbage\r\n\r\n"); !strings.Contains(got, " 400 ") {
		t.Errorf("garbage answered %q, want 400", got)
	}
	// The server survives it.
	if got := raw(t, s.Addr().String(), "GET /latest/meta-data/ HTTP/1.0\r\n\r\n"); !strings.Contains(got, " 200 ") {
		t.Errorf("request after garbage answered %q, want 200", got)
	}
}

func TestServeConnLimit(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	s := serveLoopback(t, m)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// Hold MaxConns connections open (a request line in flight keeps them
	// busy), then check the next one is cut at once.
	for range MaxConns {
		c, err := net.DialTimeout("tcp4", s.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("dialing: %v", err)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		conns = append(conns, c)
	}
	// Accept is asynchronous: give the server a bounded moment to take them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp4", s.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("dialing: %v", err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == io.EOF {
			return // cut at once
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection past MaxConns was not closed by the server (read: %v)", err)
		}
	}
}

func TestServeCloseTwice(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	s, err := Serve(t.Context(), "127.0.0.1:0", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	for i := range 2 {
		if err := s.Close(t.Context()); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
	if c, err := net.DialTimeout("tcp4", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", addr)
	}
}
