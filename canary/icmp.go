package canary

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// ServiceICMP is the ICMP echo observer on a harness-owned "outside"
// address: Method is "ECHO", Path the echo identifier and sequence.
const ServiceICMP = "icmp-sink"

// icmpEchoRequest is the ICMP type of an echo request (RFC 792).
const icmpEchoRequest = 8

// ServeICMP watches ICMP echo requests to addr (an IPv4 address the host
// holds) with a raw socket and records each one, with the token of a probe
// that put "SANDCHECK <token>/<probe-id>" in its payload. The kernel answers
// the echo itself; the socket only reads. It needs CAP_NET_RAW. Packets the
// host's firewall dropped never reach it, so a hit proves the echo got
// through. One goroutine reads, so a flood costs one packet at a time, and
// the Recorder caps what is kept.
func (s *Sink) ServeICMP(ctx context.Context, addr string) (*Listener, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "ip4:icmp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s/icmp: %w", addr, err)
	}
	l := &Listener{addr: pc.LocalAddr(), close: pc.Close}
	local := pc.LocalAddr().String()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, maxSinkRead)
		for failures := 0; failures < 100; {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				failures++
				continue
			}
			failures = 0
			hit, ok := parseEcho(buf[:n])
			if !ok {
				continue
			}
			hit.Time, hit.Remote, hit.Local = s.now().UTC(), from.String(), local
			s.rec.Record(hit)
		}
	}()
	return l, nil
}

// parseEcho reads an ICMP echo request (the IPv4 header already removed by
// the socket): type, code, checksum, identifier, sequence, then the payload,
// whose first line may carry the probe's hello. Anything else is ignored.
func parseEcho(b []byte) (Hit, bool) {
	if len(b) < 8 || b[0] != icmpEchoRequest || b[1] != 0 {
		return Hit{}, false
	}
	id, seq := binary.BigEndian.Uint16(b[4:6]), binary.BigEndian.Uint16(b[6:8])
	hit := Hit{Service: ServiceICMP, Method: "ECHO", Transport: "icmp", Path: fmt.Sprintf("id=%d seq=%d", id, seq)}
	payload := b[8:]
	for i, c := range payload {
		if c == '\n' {
			payload = payload[:i]
			break
		}
	}
	hit.Token, hit.Probe = parseHello(payload)
	return hit, true
}
