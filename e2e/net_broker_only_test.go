package e2e

import (
	"net/netip"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// TestBrokerOnlyReachesOnlyTheBroker runs every probe on the broker-only
// reference (the hardened settings on the harness network, egress
// broker-only, profile brokered-data-task): the tool broker serves the task's
// token, with the broker confirming the probe's token, refuses a request
// without it, and every other probe is blocked. Every canary hit of the run
// arrived on the broker or the filtering resolver.
func TestBrokerOnlyReachesOnlyTheBroker(t *testing.T) {
	r, rec := runEgressReference(t, "broker-only", "brokered-data-task")
	it := confirmedHit(t, rec, "egress.tool-broker", "broker-hit", "tool-broker")
	broker := netip.MustParseAddrPort(it.Data["local"])
	for _, res := range rec.Results {
		if _, ok := hostItem(res, evidence.SourceCanary, "broker-hit"); ok && res.Probe == "egress.broker-no-token" {
			t.Errorf("egress.broker-no-token: a refused request counted as a hit: %+v", res.Evidence)
		}
	}
	everyHitOn(t, r, "broker-only", "its broker", func(h hit, local netip.AddrPort) bool {
		return local == broker && h.Service == "tool-broker"
	})
}
