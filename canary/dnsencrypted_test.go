package canary

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func encryptedCanary(t *testing.T) (*DNS, *Recorder, *tls.Config) {
	t.Helper()
	rec := NewRecorder(0, nil)
	d := NewDNS(DNSOptions{Recorder: rec, Outside: netip.MustParseAddr("198.51.100.10")})
	cfg, err := SelfSignedTLS([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	return d, rec, cfg
}

func exfilQuery(token, probe string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(token+"."+probe+"."+ExfilLabel+"."+DefaultZone+".", dns.TypeA)
	return m
}

// TestDoT: a DNS-over-TLS client gets the zone's answer and the canary
// records the token with transport dot.
func TestDoT(t *testing.T) {
	d, rec, cfg := encryptedCanary(t)
	s, err := ServeDoT(t.Context(), "127.0.0.1:0", d, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing: %v", err)
		}
	})
	cl := &dns.Client{Net: "tcp-tls", Timeout: 3 * time.Second, TLSConfig: &tls.Config{InsecureSkipVerify: true}}
	r, _, err := cl.Exchange(exfilQuery("scdot1", "egress.dot"), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("answer %v", r)
	}
	hits := rec.ByToken("scdot1")
	if len(hits) != 1 || hits[0].Transport != "dot" || hits[0].Probe != "egress.dot" || hits[0].Service != ServiceDNS || hits[0].Local != s.Addr() {
		t.Errorf("hits %+v", rec.Hits())
	}
	// A client that never completes the handshake is cut off, not waited on
	// for ever: the server still closes (the Cleanup above).
	if c, err := tls.Dial("tcp4", s.Addr(), &tls.Config{InsecureSkipVerify: true}); err == nil {
		c.Write([]byte{0, 200}) // a length prefix and nothing after it
		defer c.Close()
	}
}

// TestDoH: POST and GET in RFC 8484 wire format are answered and recorded
// with transport doh; wrong media types, malformed messages and other paths
// are refused without a hit.
func TestDoH(t *testing.T) {
	d, rec, cfg := encryptedCanary(t)
	s, err := ServeTLS(t.Context(), "127.0.0.1:0", d.DoH(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://" + s.Addr().String() + DoHPath
	wire, _ := exfilQuery("scdoh1", "egress.doh").Pack()
	resp, err := cl.Post(base, dnsMessageType, bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := new(dns.Msg)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != dnsMessageType || r.Unpack(body) != nil || len(r.Answer) != 1 {
		t.Errorf("POST: status %d, type %q, answer %v", resp.StatusCode, resp.Header.Get("Content-Type"), r)
	}
	wire, _ = exfilQuery("scdoh2", "egress.doh").Pack()
	resp, err = cl.Get(base + "?dns=" + base64.RawURLEncoding.EncodeToString(wire))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET: status %d", resp.StatusCode)
	}
	for _, tok := range []string{"scdoh1", "scdoh2"} {
		if hits := rec.ByToken(tok); len(hits) != 1 || hits[0].Transport != "doh" || hits[0].Local != s.Addr().String() {
			t.Errorf("%s: hits %+v", tok, hits)
		}
	}
	n := len(rec.Hits())
	for _, bad := range []struct {
		path, ctype string
		body        []byte
		want        int
	}{
		{DoHPath, "text/plain", wire, http.StatusUnsupportedMediaType},
		{DoHPath, dnsMessageType, []byte{1, 2, 3}, http.StatusBadRequest},
		{DoHPath, dnsMessageType, make([]byte, MaxBodyBytes+10), http.StatusBadRequest},
		{"/other", dnsMessageType, wire, http.StatusNotFound},
	} {
		resp, err := cl.Post("https://"+s.Addr().String()+bad.path, bad.ctype, bytes.NewReader(bad.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != bad.want {
			t.Errorf("POST %s %s (%d bytes): status %d, want %d", bad.path, bad.ctype, len(bad.body), resp.StatusCode, bad.want)
		}
	}
	if len(rec.Hits()) != n {
		t.Errorf("refused requests were recorded: %+v", rec.Hits()[n:])
	}
}
