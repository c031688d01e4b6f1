package e2e

import (
	"net/netip"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// TestBrokerOnlyReachesOnlyTheBroker runs every probe on the broker-only
// reference (the hardened settings on the harness network, egress
// broker-only, profile brokered-data-task): the tool broker serves the task's
// token, with the broker confirming the probe's token, refuses a request
// without it, and every other probe is blocked. Every canary hit of the run
// arrived on the broker or the filtering resolver.
func TestBrokerOnlyReachesOnlyTheBroker(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/broker-only.yaml", "--quiet")
	rec := r.mustRecord(t)
	if r.code != 0 {
		t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rec.Target.Egress != "broker-only" || rec.Target.Profile != "brokered-data-task" {
		t.Errorf("record target %+v, want profile brokered-data-task with egress broker-only", rec.Target)
	}
	everyProbe(t, rec, func(s probes.Spec) probes.Outcome { return s.Expected(rec.Target.Profile) })
	if rec.Verdict == nil || !rec.Verdict.Pass {
		t.Errorf("verdict %+v: the broker-only reference must pass", rec.Verdict)
	}
	var broker netip.AddrPort
	for _, res := range rec.Results {
		switch res.Probe {
		case "egress.tool-broker":
			it, ok := hostItem(res, evidence.SourceCanary, "broker-hit")
			if !ok || it.Indicates != probes.Escaped || it.Data["destination"] != "tool-broker" {
				t.Fatalf("egress.tool-broker: the broker did not confirm the probe's token: %+v", res.Evidence)
			}
			broker = netip.MustParseAddrPort(it.Data["local"])
		case "egress.broker-no-token":
			if _, ok := hostItem(res, evidence.SourceCanary, "broker-hit"); ok {
				t.Errorf("egress.broker-no-token: a refused request counted as a hit: %+v", res.Evidence)
			}
		}
	}
	for _, h := range canaryHits(t, r.out) {
		ap, err := netip.ParseAddrPort(h.Local)
		if err != nil {
			t.Errorf("a %s hit arrived on %q", h.Service, h.Local)
			continue
		}
		switch {
		case ap == broker && h.Service == "tool-broker":
		case h.Service == "dns-filter" && ap.Port() == 53:
		default:
			t.Errorf("a %s hit arrived on %s: a broker-only sandbox reached more than its broker and resolver", h.Service, h.Local)
		}
	}
}
