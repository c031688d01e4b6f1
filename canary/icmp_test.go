package canary

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"
)

func echoRequest(id, seq uint16, payload string) []byte {
	b := make([]byte, 8+len(payload))
	b[0] = icmpEchoRequest
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], payload)
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[2:], ^uint16(sum))
	return b
}

func TestParseEcho(t *testing.T) {
	h, ok := parseEcho(echoRequest(7, 1, SinkHello+"sc0123/egress.icmp\npadding"))
	if !ok || h.Token != "sc0123" || h.Probe != "egress.icmp" || h.Service != ServiceICMP || h.Path != "id=7 seq=1" {
		t.Errorf("parsed %+v (ok %t)", h, ok)
	}
	if h, ok := parseEcho(echoRequest(1, 1, "no hello")); !ok || h.Token != "" {
		t.Errorf("an echo without a hello: %+v (ok %t), want a hit without a token", h, ok)
	}
	for _, b := range [][]byte{nil, {8, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {3, 3, 0, 0, 0, 0, 0, 0}, {8, 1, 0, 0, 0, 0, 0, 0}} {
		if _, ok := parseEcho(b); ok {
			t.Errorf("%v parsed as an echo request", b)
		}
	}
}

// FuzzParseEcho: whatever arrives, parsing neither panics nor attributes a
// hit to a malformed token.
func FuzzParseEcho(f *testing.F) {
	f.Add(echoRequest(1, 1, SinkHello+"tok/egress.icmp\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := parseEcho(b)
		if ok && h.Token != "" && len(h.Token) > MaxFieldLen {
			t.Errorf("token of %d bytes", len(h.Token))
		}
	})
}

// TestServeICMP watches 127.0.0.1 and sends it an echo request from the
// host's own raw socket: the observer records the token. Needs root.
func TestServeICMP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_RAW) for raw ICMP sockets")
	}
	rec := NewRecorder(0, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	l, err := NewSink(SinkOptions{Recorder: rec}).ServeICMP(ctx, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	c, err := net.ListenPacket("ip4:icmp", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo(echoRequest(9, 2, SinkHello+"scicmp/egress.icmp\n"), &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if hits := rec.ByToken("scicmp"); len(hits) > 0 {
			if hits[0].Local != "127.0.0.1" || hits[0].Transport != "icmp" || hits[0].Path != "id=9 seq=2" {
				t.Errorf("hit %+v", hits[0])
			}
			return
		}
	}
	t.Fatalf("no hit with the token; hits %+v", rec.Hits())
}
