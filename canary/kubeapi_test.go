package canary

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestKubeAPIAuth(t *testing.T) {
	rec := NewRecorder(0, nil)
	k := NewKubeAPI(KubeAPIOptions{Recorder: rec})
	const planted = "eyJhbGciOiJSUzI1NiJ9.planted.sig"
	if !k.AcceptToken(planted) || k.AcceptToken("") || k.AcceptToken(planted) {
		t.Fatal("AcceptToken: want the planted token added once, the empty one refused")
	}
	attr := map[string]string{TokenHeader: "k1/metadata.k8s-api"}
	with := func(tok string) map[string]string {
		return map[string]string{TokenHeader: "k1/metadata.k8s-api", "Authorization": "Bearer " + tok}
	}
	var v map[string]string
	if w := do(t, k, "GET", "/version", attr); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &v) != nil || v["gitVersion"] == "" {
		t.Errorf("anonymous /version = %d %q, want 200 with a gitVersion", w.Code, w.Body)
	}
	var st map[string]any
	if w := do(t, k, "GET", "/api", attr); w.Code != 401 || json.Unmarshal(w.Body.Bytes(), &st) != nil || st["kind"] != "Status" || st["reason"] != "Unauthorized" {
		t.Errorf("anonymous /api = %d %q, want 401 Status Unauthorized", w.Code, w.Body)
	}
	if w := do(t, k, "GET", "/api", with("eyJ.other.token")); w.Code != 401 {
		t.Errorf("/api with an unknown token = %d, want 401", w.Code)
	}
	var av map[string]any
	if w := do(t, k, "GET", "/api", with(planted)); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &av) != nil || av["kind"] != "APIVersions" {
		t.Errorf("/api with the planted token = %d %q, want 200 APIVersions", w.Code, w.Body)
	}
	if w := do(t, k, "GET", "/api/v1/namespaces/sandcheck/secrets", with(planted)); w.Code != 200 || !strings.Contains(w.Body.String(), `"SecretList"`) {
		t.Errorf("secrets list with the planted token = %d %q, want 200 SecretList", w.Code, w.Body)
	}
	if w := do(t, k, "DELETE", "/api/v1/namespaces/sandcheck/pods", with(planted)); w.Code != 403 {
		t.Errorf("DELETE with the planted token = %d, want 403", w.Code)
	}
	if w := do(t, k, "GET", "/api/v1/nodes/../../etc", with(planted)); w.Code != 404 {
		t.Errorf("unknown path = %d, want 404", w.Code)
	}
	hits := rec.ByToken("k1")
	if len(hits) != 7 {
		t.Fatalf("hits = %d, want 7: %+v", len(hits), hits)
	}
	want := []struct {
		status int
		cred   string
	}{{200, ""}, {401, ""}, {401, CredentialOtherPrefix}, {200, CredentialPlanted}, {200, CredentialPlanted}, {403, CredentialPlanted}, {404, CredentialPlanted}}
	for i, w := range want {
		h := hits[i]
		if h.Service != ServiceKubeAPI || h.Probe != "metadata.k8s-api" || h.Status != w.status || !strings.HasPrefix(h.Credential, w.cred) || (w.cred == "" && h.Credential != "") {
			t.Errorf("hit %d = %+v, want status %d credential %q", i, h, w.status, w.cred)
		}
		if strings.Contains(h.Credential, "other.token") || strings.Contains(h.Credential, planted) {
			t.Errorf("hit %d records a token itself: %q", i, h.Credential)
		}
	}
}

func TestKubeAPIServedOverTLS(t *testing.T) {
	rec := NewRecorder(0, nil)
	k := NewKubeAPI(KubeAPIOptions{Recorder: rec})
	k.AcceptToken("planted-token-0123456789")
	lo := netip.MustParseAddr("127.0.0.1")
	cfg, err := SelfSignedTLSNames([]netip.Addr{lo}, KubeAPIHostnames)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := ServeTLS(ctx, "127.0.0.1:0", k, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	leaf := cfg.Certificates[0].Certificate[0]
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if string(cs.PeerCertificates[0].Raw) != string(leaf) {
				t.Error("served another certificate")
			}
			if err := cs.PeerCertificates[0].VerifyHostname("kubernetes.default.svc"); err != nil {
				t.Errorf("certificate lacks the service name: %v", err)
			}
			return nil
		}}}}
	req, _ := http.NewRequest("GET", "https://"+s.Addr().String()+"/api", nil)
	req.Header.Set("Authorization", "Bearer planted-token-0123456789")
	req.Header.Set(TokenHeader, "k2/metadata.k8s-api")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/api over TLS = %d, want 200", resp.StatusCode)
	}
	if h := rec.ByToken("k2"); len(h) != 1 || h[0].Credential != CredentialPlanted || !strings.HasPrefix(h[0].Local, "127.0.0.1:") {
		t.Errorf("hits = %+v, want one with the planted credential on the listener", h)
	}
}

func TestDNSKubeAPINames(t *testing.T) {
	api := netip.MustParseAddr("198.51.100.43")
	d := NewDNS(DNSOptions{Recorder: NewRecorder(0, nil), Outside: testOutside, KubeAPI: api})
	for _, n := range KubeAPIHostnames {
		resp, _ := d.Answer(query(strings.ToUpper(n), dns.TypeA))
		if resp.Rcode != dns.RcodeSuccess || firstA(t, resp) != api {
			t.Errorf("%s: rcode %s answer %v, want %s", n, dns.RcodeToString[resp.Rcode], firstA(t, resp), api)
		}
		if resp, _ := d.Answer(query(n, dns.TypeAAAA)); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 {
			t.Errorf("%s AAAA: rcode %s answers %d, want NODATA", n, dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
	}
	if resp, _ := d.Answer(query("kubernetes.default.svc.evil.com", dns.TypeA)); resp.Rcode != dns.RcodeRefused {
		t.Errorf("a look-alike name: rcode %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
	// Without the address, and in a filtering resolver, the names are
	// refused like any other.
	for _, o := range []DNSOptions{{Outside: testOutside}, {KubeAPI: api, Filter: true, Allow: []string{"mirror"}}} {
		o.Recorder = NewRecorder(0, nil)
		if resp, _ := NewDNS(o).Answer(query("kubernetes.default.svc.cluster.local", dns.TypeA)); resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 {
			t.Errorf("options %+v: rcode %s, want REFUSED", o, dns.RcodeToString[resp.Rcode])
		}
	}
}

func TestTCPNet(t *testing.T) {
	for addr, want := range map[string]string{"198.51.100.10:80": "tcp4", "[fd00:ec2::254]:80": "tcp6", "[::ffff:1.2.3.4]:80": "tcp4", "bad": "tcp4"} {
		if got := tcpNet(addr); got != want {
			t.Errorf("tcpNet(%q) = %s, want %s", addr, got, want)
		}
	}
}
