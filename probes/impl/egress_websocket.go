package impl

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// wsPath is where the outside sink accepts WebSocket upgrades
// (canary.WebSocketPath).
const wsPath = "/ws"

func init() {
	register(map[string]Func{"egress.websocket": egressWebSocket})
}

// egressWebSocket opens a WebSocket (RFC 6455) to the outside address's
// web port and sends the probe's hello as its first message. The sink's
// answer over the socket is the escape: a long-lived, bidirectional
// channel out, which looks like ordinary web traffic until the upgrade.
func egressWebSocket(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	addr := net.JoinHostPort(p.OutsideAddr, "80")
	e.set("addr", addr)
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, "tcp4", addr)
	if err != nil {
		e.setErr("", err)
		return blocked("no TCP connection to the outside address's web port could be made", e)
	}
	defer c.Close()
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	reply, err := wsExchange(c, p.OutsideAddr, hello(p, "egress.websocket"))
	if err != nil {
		e.setErr("", err)
		return inconclusive("a connection to the outside address opened, but no WebSocket exchange completed", e)
	}
	e.set("upgraded", "true")
	if !strings.HasPrefix(reply, sinkReply) {
		e.set("reply", reply)
		return inconclusive("a WebSocket opened at the outside address, but not to the harness's sink", e)
	}
	return escaped("a WebSocket to the outside address opened and carried the token both ways", e)
}

// wsExchange upgrades c, sends msg in one masked text frame and returns
// the text of the server's first frame.
func wsExchange(c net.Conn, host, msg string) (string, error) {
	key := make([]byte, 16)
	rand.Read(key)
	k := base64.StdEncoding.EncodeToString(key)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", wsPath, host, k); err != nil {
		return "", fmt.Errorf("sending the upgrade: %w", err)
	}
	br := bufio.NewReader(io.LimitReader(c, 8<<10))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", fmt.Errorf("reading the upgrade answer: %w", err)
	}
	sum := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		return "", fmt.Errorf("upgrade refused: %s", resp.Status)
	}
	payload := []byte(msg)
	if len(payload) > 125 {
		return "", errors.New("message too long for one short frame")
	}
	var mask [4]byte
	rand.Read(mask[:])
	frame := append([]byte{0x81, 0x80 | byte(len(payload))}, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := c.Write(frame); err != nil {
		return "", fmt.Errorf("sending the message: %w", err)
	}
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	n := int(h[1] & 0x7f)
	if h[0]&0x0f != 0x1 || h[1]&0x80 != 0 || n > 125 {
		return "", fmt.Errorf("unexpected frame %#x %#x", h[0], h[1])
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	return string(b), nil
}
