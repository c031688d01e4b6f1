package impl

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
)

// TestIPv6ProbesAgainstCanaries runs the IPv6 probes against the harness's
// own canaries on the IPv6 loopback.
func TestIPv6ProbesAgainstCanaries(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("needs the IPv6 loopback: %v", err)
	}
	m := canary.NewMetadata(canary.MetadataOptions{})
	srv := &http.Server{Handler: m}
	go srv.Serve(ln)
	defer srv.Close()
	rec := canary.NewRecorder(0, nil)
	sink := canary.NewSink(canary.SinkOptions{Recorder: rec, Role: "outside"})
	sl, err := sink.ServeTCP(context.Background(), "[::1]:80")
	if err != nil {
		t.Skipf("needs port 80 on the IPv6 loopback: %v", err)
	}
	defer sl.Close(context.Background())

	p := probes.Params{Token: "tok6", Metadata6Addr: ln.Addr().String(), Outside6Addr: "::1"}
	r := imdsIPv6(context.Background(), p)
	if r.Outcome != probes.Escaped || r.Evidence["access_key_id"] != m.Honey().AWS.AccessKeyID || r.Evidence["token_status"] != "200" {
		t.Errorf("imds ipv6: %s %v", r.Outcome, r.Evidence)
	}
	if h := m.Recorder().ByToken("tok6"); len(h) != 3 || h[0].Probe != "metadata.aws-imds-ipv6" || !strings.HasPrefix(h[0].Local, "[::1]:") {
		t.Errorf("metadata hits %+v, want 3 attributed on [::1]", h)
	}
	r = egressIPv6(context.Background(), p)
	if r.Outcome != probes.Escaped || r.Evidence["acked"] != "true" {
		t.Errorf("egress ipv6: %s %v", r.Outcome, r.Evidence)
	}
	if h := rec.ByToken("tok6"); len(h) != 1 || h[0].Probe != "egress.ipv6" {
		t.Errorf("sink hits %+v, want one from egress.ipv6", h)
	}
	// IPv4 addresses are not the IPv6 probes' to use: nothing is sent.
	for _, r := range []probes.Result{
		imdsIPv6(context.Background(), probes.Params{Token: "tok6", Metadata6Addr: "127.0.0.1:80"}),
		egressIPv6(context.Background(), probes.Params{Token: "tok6", Outside6Addr: "::ffff:127.0.0.1"}),
	} {
		if r.Evidence["sent"] != "false" || r.Outcome != probes.Inconclusive {
			t.Errorf("an IPv4 address: %s %v, want nothing sent", r.Outcome, r.Evidence)
		}
	}
}
