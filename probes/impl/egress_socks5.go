package impl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// A minimal SOCKS5 client (RFC 1928) for the proxy path of a wrapper
// sandbox: CONNECT only, to an IP literal only (a name would have the
// proxy resolve it, through a resolver the harness does not hold), no
// authentication or username/password (RFC 1929) where the proxy's URL
// carries credentials, as srt's does. Every read is of a fixed size and
// the whole exchange is bounded by egressTimeout.

// SOCKS5 protocol constants.
const (
	socksVersion      = 0x05
	socksAuthNone     = 0x00
	socksAuthPassword = 0x02
	socksAuthRefused  = 0xff
	socksCmdConnect   = 0x01
	socksAtypIPv4     = 0x01
	socksAtypName     = 0x03
	socksAtypIPv6     = 0x04
	socksPassVersion  = 0x01
)

// socksRefusal is a SOCKS5 proxy's clear no: it offered no method the
// client can use, turned down the credentials, or answered CONNECT with
// a failure code. The proxy decided; nothing went through it.
type socksRefusal struct {
	stage string // "method", "auth" or "connect"
	code  byte
}

func (e *socksRefusal) Error() string {
	switch e.stage {
	case "method":
		return "the SOCKS5 proxy accepts none of the client's authentication methods"
	case "auth":
		return fmt.Sprintf("the SOCKS5 proxy refused the credentials (status %d)", e.code)
	}
	return fmt.Sprintf("the SOCKS5 proxy refused CONNECT: %s (reply %d)", socksReplyText(e.code), e.code)
}

// socksReplyText names RFC 1928's reply codes.
func socksReplyText(code byte) string {
	switch code {
	case 1:
		return "general failure"
	case 2:
		return "connection not allowed by ruleset"
	case 3:
		return "network unreachable"
	case 4:
		return "host unreachable"
	case 5:
		return "connection refused"
	case 6:
		return "TTL expired"
	case 7:
		return "command not supported"
	case 8:
		return "address type not supported"
	}
	return "unassigned code"
}

// socks5Connect opens a CONNECT tunnel through the SOCKS5 proxy at addr
// to target (IP:port), authenticating with user and pass when user is
// not empty. It returns the tunnel, its deadline set to the exchange's;
// a *socksRefusal when the proxy said no.
func socks5Connect(ctx context.Context, addr, user, pass, target string) (net.Conn, error) {
	dst, err := netip.ParseAddrPort(target)
	if err != nil {
		return nil, fmt.Errorf("SOCKS5 target %q is not an IP literal and port: %w", target, err)
	}
	if len(user) > 255 || len(pass) > 255 {
		return nil, errors.New("SOCKS5 credentials longer than 255 bytes")
	}
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the SOCKS5 proxy %s: %w", addr, err)
	}
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	if err := socks5Handshake(c, user, pass, dst); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// socks5Handshake runs the method negotiation, the optional
// username/password exchange and CONNECT on c.
func socks5Handshake(c io.ReadWriter, user, pass string, dst netip.AddrPort) error {
	methods := []byte{socksVersion, 1, socksAuthNone}
	if user != "" {
		methods = []byte{socksVersion, 2, socksAuthNone, socksAuthPassword}
	}
	if _, err := c.Write(methods); err != nil {
		return fmt.Errorf("sending the SOCKS5 greeting: %w", err)
	}
	var choice [2]byte
	if _, err := io.ReadFull(c, choice[:]); err != nil {
		return fmt.Errorf("reading the SOCKS5 method: %w", err)
	}
	if choice[0] != socksVersion {
		return fmt.Errorf("the proxy answered the SOCKS5 greeting with version %d: not SOCKS5", choice[0])
	}
	switch {
	case choice[1] == socksAuthRefused:
		return &socksRefusal{stage: "method"}
	case choice[1] == socksAuthPassword && user != "":
		req := append([]byte{socksPassVersion, byte(len(user))}, user...)
		req = append(append(req, byte(len(pass))), pass...)
		if _, err := c.Write(req); err != nil {
			return fmt.Errorf("sending the SOCKS5 credentials: %w", err)
		}
		var st [2]byte
		if _, err := io.ReadFull(c, st[:]); err != nil {
			return fmt.Errorf("reading the SOCKS5 credentials' status: %w", err)
		}
		if st[1] != 0 {
			return &socksRefusal{stage: "auth", code: st[1]}
		}
	case choice[1] != socksAuthNone:
		return fmt.Errorf("the SOCKS5 proxy chose method %d, which the client did not offer", choice[1])
	}

	ip := dst.Addr().Unmap()
	req := []byte{socksVersion, socksCmdConnect, 0}
	if ip.Is4() {
		req = append(req, socksAtypIPv4)
	} else {
		req = append(req, socksAtypIPv6)
	}
	req = append(req, ip.AsSlice()...)
	req = append(req, byte(dst.Port()>>8), byte(dst.Port()))
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("sending SOCKS5 CONNECT: %w", err)
	}
	var head [4]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return fmt.Errorf("reading the SOCKS5 reply: %w", err)
	}
	if head[0] != socksVersion {
		return fmt.Errorf("SOCKS5 reply of version %d", head[0])
	}
	if head[1] != 0 {
		return &socksRefusal{stage: "connect", code: head[1]}
	}
	// The bound address: read and dropped, its length fixed by its type.
	var n int
	switch head[3] {
	case socksAtypIPv4:
		n = 4
	case socksAtypIPv6:
		n = 16
	case socksAtypName:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return fmt.Errorf("reading the SOCKS5 reply's address: %w", err)
		}
		n = int(l[0])
	default:
		return fmt.Errorf("SOCKS5 reply with address type %d", head[3])
	}
	bound := make([]byte, n+2)
	if _, err := io.ReadFull(c, bound); err != nil {
		return fmt.Errorf("reading the SOCKS5 reply's address: %w", err)
	}
	return nil
}
