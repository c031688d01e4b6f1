package impl

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// socksServer is a SOCKS5 proxy on loopback (RFC 1928, with RFC 1929's
// username/password when user is set), standing for a wrapper's: it
// relays CONNECT to loopback destinations only, or refuses every CONNECT
// with reply (refuse != 0), and records what it was asked.
type socksServer struct {
	ln     net.Listener
	user   string
	pass   string
	refuse byte
	mu     sync.Mutex
	asked  []string
}

func newSocksServer(t *testing.T, user, pass string, refuse byte) *socksServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &socksServer{ln: ln, user: user, pass: pass, refuse: refuse}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 40 { // bounded: a test makes a few connections
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	return s
}

func (s *socksServer) addr() string { return s.ln.Addr().String() }

func (s *socksServer) record(v string) {
	s.mu.Lock()
	s.asked = append(s.asked, v)
	s.mu.Unlock()
}

func (s *socksServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func (s *socksServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil || head[0] != 5 {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	want := byte(0)
	if s.user != "" {
		want = 2
	}
	if !strings.ContainsRune(string(methods), rune(want)) {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	if want == 2 {
		var v [2]byte
		if _, err := io.ReadFull(c, v[:]); err != nil {
			return
		}
		u := make([]byte, v[1])
		io.ReadFull(c, u)
		var pl [1]byte
		io.ReadFull(c, pl[:])
		pw := make([]byte, pl[0])
		io.ReadFull(c, pw)
		if string(u) != s.user || string(pw) != s.pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[1] != 1 {
		return
	}
	var ip []byte
	switch req[3] {
	case 1:
		ip = make([]byte, 4)
	case 4:
		ip = make([]byte, 16)
	default:
		c.Write([]byte{5, 8, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	var port [2]byte
	io.ReadFull(c, ip)
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return
	}
	a, _ := netip.AddrFromSlice(ip)
	dst := netip.AddrPortFrom(a.Unmap(), uint16(port[0])<<8|uint16(port[1]))
	s.record(dst.String())
	if s.refuse != 0 || !dst.Addr().IsLoopback() {
		code := s.refuse
		if code == 0 {
			code = 2
		}
		c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	up, err := net.DialTimeout("tcp", dst.String(), 2*time.Second)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	go io.Copy(up, c)
	io.Copy(c, io.LimitReader(up, 64<<10))
}

// helloSink is a loopback sink answering one hello line a connection.
func helloSink(t *testing.T) (string, *[]string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(3 * time.Second))
			line, _ := bufio.NewReader(io.LimitReader(c, 512)).ReadString('\n')
			mu.Lock()
			got = append(got, strings.TrimSpace(line))
			mu.Unlock()
			io.WriteString(c, sinkReply+"test\n")
			c.Close()
		}
	}()
	return ln.Addr().String(), &got
}

func TestSocks5Connect(t *testing.T) {
	sink, got := helloSink(t)
	for _, tc := range []struct {
		name       string
		user, pass string // the server's
		cu, cp     string // the client's
		refuse     byte
		stage      string // "" for a tunnel
	}{
		{name: "no-auth"},
		{name: "password", user: "srt.u", pass: "tok", cu: "srt.u", cp: "tok"},
		{name: "wrong-password", user: "srt.u", pass: "tok", cu: "srt.u", cp: "nope", stage: "auth"},
		{name: "no-credentials", user: "srt.u", pass: "tok", stage: "method"},
		// The negative control: a proxy refusing CONNECT (its ruleset).
		{name: "refused", refuse: 2, stage: "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSocksServer(t, tc.user, tc.pass, tc.refuse)
			c, err := socks5Connect(t.Context(), s.addr(), tc.cu, tc.cp, sink)
			if tc.stage != "" {
				var sr *socksRefusal
				if !errors.As(err, &sr) || sr.stage != tc.stage {
					t.Fatalf("err %v, want a %s refusal", err, tc.stage)
				}
				if c != nil {
					t.Fatal("a refusal returned a connection")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, sinkHello+"tok/egress.tcp-ports/via-socks5\n")
			reply, err := bufio.NewReader(c).ReadString('\n')
			if !strings.HasPrefix(reply, sinkReply) {
				t.Fatalf("reply %q (%v), want the sink's through the tunnel", reply, err)
			}
			if r := s.requests(); len(r) != 1 || r[0] != sink {
				t.Errorf("the server was asked for %v, want %s", r, sink)
			}
		})
	}
	if len(*got) == 0 || (*got)[0] != sinkHello+"tok/egress.tcp-ports/via-socks5" {
		t.Errorf("the sink got %q", *got)
	}
}

// The client sends only IP literals and never waits past its bound on a
// proxy that says nothing.
func TestSocks5Bounds(t *testing.T) {
	if _, err := socks5Connect(t.Context(), "127.0.0.1:1", "", "", "example.com:80"); err == nil || !strings.Contains(err.Error(), "IP literal") {
		t.Errorf("a name was accepted: %v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(egressTimeout + 2*time.Second)
		}
	}()
	start := time.Now()
	_, err = socks5Connect(t.Context(), ln.Addr().String(), "", "", "127.0.0.1:9")
	if err == nil || time.Since(start) > egressTimeout+time.Second {
		t.Errorf("a silent proxy: err %v after %s, want an error within %s", err, time.Since(start), egressTimeout)
	}
	if o, _ := refusedOr(err); o != "inconclusive" {
		t.Errorf("a silent proxy reads %s, want inconclusive", o)
	}
}
