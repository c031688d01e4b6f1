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

func serveSink(t *testing.T, s *Sink, udp bool) *Listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	serve := s.ServeTCP
	if udp {
		serve = s.ServeUDP
	}
	l, err := serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("serving sink: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("closing sink: %v", err)
		}
	})
	return l
}

func TestSinkTCPHello(t *testing.T) {
	rec := NewRecorder(0, nil)
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec}), false)
	c, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, SinkHello+"sc0123456789ab/egress.tcp-ports\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != SinkReply+"outside\n" {
		t.Fatalf("reply %q (err %v)", line, err)
	}
	hits := rec.ByToken("sc0123456789ab")
	if len(hits) != 1 || hits[0].Probe != "egress.tcp-ports" || hits[0].Service != ServiceTCP || hits[0].Local != l.Addr().String() {
		t.Errorf("hits %+v", rec.Hits())
	}
}

func TestSinkTCPSilentAndGarbage(t *testing.T) {
	rec := NewRecorder(0, nil)
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec}), false)
	c, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, strings.Repeat("\x00\xff", 20000))
	c.Close()
	deadline := time.Now().Add(SinkTimeout + 2*time.Second)
	for len(rec.Hits()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	hits := rec.Hits()
	if len(hits) != 1 || hits[0].Token != "" {
		t.Errorf("hits %+v, want one unattributed", hits)
	}
}

func TestSinkHTTPRedirect(t *testing.T) {
	rec := NewRecorder(0, nil)
	target := "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec, RedirectTo: target}), false)
	cl := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+l.Addr().String()+RedirectPath, nil)
	req.Header.Set(TokenHeader, "sc0123456789ab/metadata.redirect")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target {
		t.Errorf("status %d location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	hits := rec.ByToken("sc0123456789ab")
	if len(hits) != 1 || hits[0].Service != ServiceHTTP || hits[0].Probe != "metadata.redirect" || hits[0].Status != 302 {
		t.Errorf("hits %+v", rec.Hits())
	}
}

func TestSinkUDP(t *testing.T) {
	rec := NewRecorder(0, nil)
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec, Role: "udp-outside"}), true)
	c, err := net.Dial("udp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("garbage"))
	c.Write([]byte(SinkHello + "sc0123456789ab/egress.udp\n"))
	buf := make([]byte, 128)
	for range 2 {
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != SinkReply+"udp-outside\n" {
			t.Fatalf("reply %q (err %v)", buf[:n], err)
		}
	}
	if hits := rec.ByToken("sc0123456789ab"); len(hits) != 1 || hits[0].Service != ServiceUDP || hits[0].Transport != "udp" {
		t.Errorf("hits %+v", rec.Hits())
	}
	if len(rec.Hits()) != 2 {
		t.Errorf("want the garbage datagram recorded too: %+v", rec.Hits())
	}
}
