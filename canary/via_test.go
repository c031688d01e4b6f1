package canary

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// An attribution's third segment names the path a probe sent it by (Hit.Via);
// anything malformed there is dropped, never let into the probe ID.
func TestSplitVia(t *testing.T) {
	for _, tc := range []struct{ in, token, probe, via string }{
		{"tok/egress.tcp-ports", "tok", "egress.tcp-ports", ""},
		{"tok/egress.tcp-ports/via-socks5", "tok", "egress.tcp-ports", "via-socks5"},
		{"tok/egress.tcp-ports/socks5", "tok", "egress.tcp-ports", ""},
		{"tok/egress.tcp-ports/via-SOCKS", "tok", "egress.tcp-ports", ""},
		{"tok/egress.tcp-ports/via-a/b", "tok", "egress.tcp-ports", ""},
		{"tok/Bad/via-get", "tok", "", ""},
		{"b@d/egress.udp/via-get", "", "", ""},
	} {
		tok, pr, via := splitVia(tc.in)
		if tok != tc.token || pr != tc.probe || via != tc.via {
			t.Errorf("splitVia(%q) = %q %q %q, want %q %q %q", tc.in, tok, pr, via, tc.token, tc.probe, tc.via)
		}
	}
}

// The sink records the path of a hello and of an HTTP request.
func TestSinkRecordsVia(t *testing.T) {
	rec := NewRecorder(0, nil)
	l := serveSink(t, NewSink(SinkOptions{Recorder: rec}), false)
	send := func(msg string) {
		c, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, msg)
		bufio.NewReader(c).ReadString('\n')
	}
	send(SinkHello + "tokA/egress.tcp-ports/via-socks5\n")
	send("GET / HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": tokB/egress.websocket/via-get\r\n\r\n")
	send("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: " + AgentProduct + "/tokC/egress.ipv6/via-connect\r\n\r\n")
	for tok, want := range map[string]string{"tokA": "via-socks5", "tokB": "via-get", "tokC": "via-connect"} {
		hits := rec.ByToken(tok)
		if len(hits) != 1 || hits[0].Via != want || hits[0].Probe == "" {
			t.Errorf("%s: hits %+v, want one with via %s", tok, hits, want)
		}
	}
}

// The metadata canary records the path too.
func TestMetadataRecordsVia(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	do(t, m, "GET", "/latest/meta-data/", map[string]string{TokenHeader: "t1/metadata.aws-imdsv1/via-get"})
	do(t, m, "GET", "/latest/meta-data/", map[string]string{TokenHeader: "t2/metadata.aws-imdsv1"})
	hits := m.Recorder().Hits()
	if len(hits) != 2 || hits[0].Via != "via-get" || hits[0].Probe != "metadata.aws-imdsv1" || hits[1].Via != "" {
		t.Errorf("hits %+v, want the first via-get, the second direct", hits)
	}
}
