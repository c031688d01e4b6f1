package impl

import (
	"context"
	"net/netip"
	"testing"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
)

// loopCanaries are the harness's own mirror, proxy and broker on the IPv4
// loopback, on ports the kernel picks.
type loopCanaries struct {
	rec                *canary.Recorder
	mirror, proxy, brk string
}

func startLoopCanaries(t *testing.T, brokerToken string, proxyAllows bool) loopCanaries {
	t.Helper()
	ctx := context.Background()
	rec := canary.NewRecorder(0, nil)
	mirror, err := canary.NewSink(canary.SinkOptions{Recorder: rec, Role: mirrorRole}).ServeTCP(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mirror.Close(ctx) })
	mirrorAP := netip.MustParseAddrPort(mirror.Addr().String())
	proxy, err := canary.NewProxy(canary.ProxyOptions{Recorder: rec,
		Owned: func(a netip.Addr) bool { return a == mirrorAP.Addr() },
		Allow: func(ap netip.AddrPort) bool { return proxyAllows && ap == mirrorAP },
	}).Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close(ctx) })
	brk, err := canary.Serve(ctx, "127.0.0.1:0", canary.NewBroker(rec, brokerToken, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { brk.Close(ctx) })
	return loopCanaries{rec: rec, mirror: mirror.Addr().String(), proxy: proxy.Addr().String(), brk: brk.Addr().String()}
}

// hitsOf counts the recorder's hits with token attributed to probe that
// the canary served (a proxy records the CONNECTs it refuses too).
func (c loopCanaries) hitsOf(token, probe string) int {
	n := 0
	for _, h := range c.rec.ByToken(token) {
		if h.Probe == probe && (h.Status == 0 || h.Status == 200) {
			n++
		}
	}
	return n
}

// Each network workload goes through on the canary it needs, and the canary
// saw the probe's token.
func TestNetworkWorkloadsAgainstCanaries(t *testing.T) {
	c := startLoopCanaries(t, "scb-task", true)
	p := probes.Params{Token: "tokw", MirrorAddr: c.mirror, ProxyAddr: c.proxy, BrokerAddr: c.brk, BrokerToken: "scb-task"}
	for _, tc := range []struct {
		id   string
		f    Func
		hits int
	}{
		{"workload.build-from-mirror", workloadBuild, 2},
		{"workload.browse-approved-site", workloadBrowse, 2},
		{"workload.broker-query", workloadBrokerQuery, 2},
		{"workload.publish-message", workloadPublish, 1},
	} {
		r := tc.f(context.Background(), p)
		if r.Outcome != probes.Escaped {
			t.Errorf("%s: %s %q %v, want escaped", tc.id, r.Outcome, r.Detail, r.Evidence)
		}
		if n := c.hitsOf("tokw", tc.id); n < tc.hits {
			t.Errorf("%s: %d canary hits with the probe's token, want %d", tc.id, n, tc.hits)
		}
	}
}

// A broker that refuses the task's token, a proxy that refuses the approved
// site and a mirror nobody listens on block the workloads.
func TestNetworkWorkloadsBlocked(t *testing.T) {
	c := startLoopCanaries(t, "scb-other", false)
	p := probes.Params{Token: "tokb", MirrorAddr: "127.0.0.1:1", ProxyAddr: c.proxy, BrokerAddr: c.brk, BrokerToken: "scb-task"}
	for id, f := range map[string]Func{
		"workload.build-from-mirror":    workloadBuild,
		"workload.browse-approved-site": workloadBrowse,
		"workload.broker-query":         workloadBrokerQuery,
		"workload.publish-message":      workloadPublish,
	} {
		if r := f(context.Background(), p); r.Outcome != probes.Blocked {
			t.Errorf("%s: %s %q %v, want blocked", id, r.Outcome, r.Detail, r.Evidence)
		}
		if n := c.hitsOf("tokb", id); n != 0 {
			t.Errorf("%s: a refused call counted as %d served hits", id, n)
		}
	}
}

// The build step makes the artifact of its sources and refuses bad
// arguments.
func TestChildBuild(t *testing.T) {
	if childBuild(nil) != 2 || childBuild([]string{"rel"}) != 2 {
		t.Error("bad arguments accepted")
	}
	if childBuild([]string{t.TempDir()}) != 1 {
		t.Error("an empty build folder built")
	}
}
