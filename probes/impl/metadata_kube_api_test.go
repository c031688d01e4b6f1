package impl

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
)

// TestK8sAPIAgainstCanary runs metadata.k8s-api against the harness's own
// Kubernetes API canary on loopback: reaching it is an escape, and every
// request carries the probe's attribution.
func TestK8sAPIAgainstCanary(t *testing.T) {
	rec := canary.NewRecorder(0, nil)
	srv := httptest.NewTLSServer(canary.NewKubeAPI(canary.KubeAPIOptions{Recorder: rec}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	r := k8sAPI(context.Background(), probes.Params{Token: "tokK", KubeAPIAddr: addr})
	if r.Outcome != probes.Escaped || r.Evidence["version_status"] != "200" || r.Evidence["anonymous_status"] != "401" || r.Evidence["addr"] != addr {
		t.Errorf("k8s-api against the canary: %s %q %v", r.Outcome, r.Detail, r.Evidence)
	}
	hits := rec.ByToken("tokK")
	if len(hits) < 2 {
		t.Fatalf("hits = %+v, want /version and /api with the token", hits)
	}
	for _, h := range hits {
		if h.Probe != "metadata.k8s-api" || h.Service != canary.ServiceKubeAPI {
			t.Errorf("hit %+v not attributed to metadata.k8s-api", h)
		}
	}
}

// TestK8sAPIBlocked checks a refused connection is blocked and that no
// address is no contact at all.
func TestK8sAPIBlocked(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if r := k8sAPI(context.Background(), probes.Params{Token: "tokB", KubeAPIAddr: addr}); r.Outcome != probes.Blocked || r.Evidence["connected"] != "false" {
		t.Errorf("closed port: %s %q %v, want blocked", r.Outcome, r.Detail, r.Evidence)
	}
	if r := k8sAPI(context.Background(), probes.Params{Token: "tokB"}); r.Evidence["sent"] != "false" {
		t.Errorf("no address: %s %v, want nothing sent", r.Outcome, r.Evidence)
	}
}
