package canary

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSinkWebSocket: the sink upgrades, reads the first (masked) message,
// records its token and answers in a text frame; an unmasked frame gets a
// hit without a token.
func TestSinkWebSocket(t *testing.T) {
	rec := NewRecorder(0, nil)
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec}), false)
	send := func(msg string, mask bool) (string, *http.Response) {
		t.Helper()
		c, err := net.DialTimeout("tcp4", l.Addr().String(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		frame := []byte{0x81, byte(len(msg))}
		payload := []byte(msg)
		if mask {
			m := []byte{1, 2, 3, 4}
			frame[1] |= 0x80
			frame = append(frame, m...)
			for i := range payload {
				payload[i] ^= m[i%4]
			}
		}
		c.Write(append(frame, payload...))
		var h [2]byte
		io.ReadFull(br, h[:])
		b := make([]byte, h[1]&0x7f)
		io.ReadFull(br, b)
		return string(b), resp
	}
	got, resp := send(SinkHello+"scws1/egress.websocket\n", true)
	// RFC 6455's own example key and accept value.
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("upgrade answer %s %v", resp.Status, resp.Header)
	}
	if got != SinkReply+"outside\n" {
		t.Errorf("answer %q", got)
	}
	hits := rec.ByToken("scws1")
	if len(hits) != 1 || hits[0].Method != "WEBSOCKET" || hits[0].Probe != "egress.websocket" || hits[0].Path != "/ws" {
		t.Errorf("hits %+v", rec.Hits())
	}
	send(SinkHello+"scws2/egress.websocket\n", false)
	if len(rec.ByToken("scws2")) != 0 || len(rec.Hits()) != 2 {
		t.Errorf("an unmasked frame was attributed: %+v", rec.Hits())
	}
}

func TestReadWSFrameBounds(t *testing.T) {
	for _, b := range [][]byte{
		{0x81, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, // 64-bit length
		{0x81, 0xfe, 0xff, 0xff, 1, 2, 3, 4}, // 65535 > maxWSPayload
		{0x01, 0x81, 1, 2, 3, 4, 'x'},        // not final
		{0x89, 0x81, 1, 2, 3, 4, 'x'},        // ping, not a message
		{0x81, 0x85, 1, 2, 3, 4, 'x'},        // short payload
	} {
		if _, err := readWSFrame(bytes.NewReader(b)); err == nil {
			t.Errorf("% x accepted", b)
		}
	}
	if !strings.HasPrefix(wsAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") {
		t.Error("accept value differs from RFC 6455's example")
	}
}
