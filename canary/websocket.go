package canary

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// WebSocketPath on an HTTP sink accepts a WebSocket upgrade (RFC 6455): the
// sink reads the client's first message, records the hit with the token a
// "SANDCHECK <token>/<probe-id>" text carries, answers with the sink reply
// in one text frame and closes.
const WebSocketPath = "/ws"

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// maxWSPayload bounds the one message the sink reads.
const maxWSPayload = 1024

// isWebSocket reports whether req asks for a WebSocket upgrade at
// WebSocketPath.
func isWebSocket(req *http.Request) bool {
	return req.URL.Path == WebSocketPath && req.Method == http.MethodGet &&
		strings.EqualFold(req.Header.Get("Upgrade"), "websocket") &&
		headerHasToken(req.Header.Get("Connection"), "upgrade") &&
		req.Header.Get("Sec-WebSocket-Key") != ""
}

func headerHasToken(v, tok string) bool {
	for _, f := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), tok) {
			return true
		}
	}
	return false
}

// wsAccept is the Sec-WebSocket-Accept value for a key.
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// serveWebSocket completes the upgrade, reads one message and records it.
// The connection's deadline (SinkTimeout) bounds all of it.
func (s *Sink) serveWebSocket(c net.Conn, br *bufio.Reader, req *http.Request, hit Hit) {
	hit.Service, hit.Method, hit.Path, hit.Agent = ServiceHTTP, "WEBSOCKET", clip(req.URL.RequestURI()), clip(req.UserAgent())
	hit.Status = http.StatusSwitchingProtocols
	if _, err := fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		wsAccept(req.Header.Get("Sec-WebSocket-Key"))); err != nil {
		s.rec.Record(hit)
		return
	}
	msg, err := readWSFrame(br)
	if err == nil {
		hit.Token, hit.Probe = parseHello([]byte(strings.SplitN(string(msg), "\n", 2)[0]))
	}
	s.rec.Record(hit)
	writeWSFrame(c, 0x1, []byte(SinkReply+s.role+"\n"))
	writeWSFrame(c, 0x8, []byte{0x03, 0xe8}) // close, 1000 normal
}

// readWSFrame reads one client text or binary frame: it must be final and
// masked (RFC 6455 5.1) and at most maxWSPayload long.
func readWSFrame(r io.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("reading frame header: %w", err)
	}
	if h[0]&0x80 == 0 || (h[0]&0x0f != 0x1 && h[0]&0x0f != 0x2) {
		return nil, errors.New("not a final text or binary frame")
	}
	if h[1]&0x80 == 0 {
		return nil, errors.New("client frame not masked")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return nil, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		return nil, errors.New("frame too long")
	}
	if n > maxWSPayload {
		return nil, errors.New("frame too long")
	}
	var mask [4]byte
	if _, err := io.ReadFull(r, mask[:]); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	for i := range b {
		b[i] ^= mask[i%4]
	}
	return b, nil
}

// writeWSFrame writes one final, unmasked server frame (payload < 126).
func writeWSFrame(w io.Writer, opcode byte, payload []byte) error {
	if len(payload) > 125 {
		return errors.New("payload too long for a short frame")
	}
	_, err := w.Write(append([]byte{0x80 | opcode, byte(len(payload))}, payload...))
	return err
}
