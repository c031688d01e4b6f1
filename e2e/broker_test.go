package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// brokerProbes are the broker token probes (probes/catalog/14-broker.yaml).
const brokerProbes = "secrets.broker-token-*"

// brokerTokenShapes match the tokens the reference broker mints (the weak
// static key, a hardened JWT's header); no report may hold one.
var brokerTokenShapes = regexp.MustCompile(`scw[0-9a-f]{32}|eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9\.`)

// runBrokerProbes runs the broker probes on a reference and checks each
// probe's effective outcome and the broker's record in its evidence.
func runBrokerProbes(t *testing.T, target string, want probes.Outcome) *evidence.Record {
	t.Helper()
	r := sandcheck(t, "run", "--target", "fixtures/targets/"+target, "--quiet", "--probes", brokerProbes)
	rec := r.mustRecord(t)
	seen := map[string]bool{}
	for i, res := range rec.Results {
		seen[res.Probe] = true
		if eff := rec.Effective(i); eff != want {
			t.Errorf("%s on %s: effective %s, want %s (reported %s: %s; evidence %+v)", res.Probe, target, eff, want, res.Outcome, res.Detail, res.Evidence)
		}
		kind := map[string]string{"secrets.broker-token-lifetime": "lifetime", "secrets.broker-token-scope": "scope", "secrets.broker-token-replay": "replay", "secrets.broker-token-revocation": "revocation"}[res.Probe]
		it, ok := hostItem(res, "broker", kind)
		switch {
		case !ok:
			t.Errorf("%s on %s: no broker/%s item: %+v", res.Probe, target, kind, res.Evidence)
		case it.Data["token_sha256"] == "" || len(it.Data["token_sha256"]) != 64:
			t.Errorf("%s on %s: the broker's item names no token SHA-256: %+v", res.Probe, target, it)
		}
	}
	for _, id := range []string{"secrets.broker-token-lifetime", "secrets.broker-token-scope", "secrets.broker-token-replay", "secrets.broker-token-revocation"} {
		if !seen[id] {
			t.Errorf("%s: no result on %s", id, target)
		}
	}
	for _, f := range []string{"run.json", "evidence.jsonl", "summary.md", "report.html"} {
		b, err := os.ReadFile(filepath.Join(r.out, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if m := brokerTokenShapes.Find(b); m != nil {
			t.Errorf("%s holds a broker token (%q...)", f, m[:12])
		}
	}
	return rec
}

// TestBrokerTokenNegativeControl: on the weak reference (one static key,
// never expiring, opening anything, never revoked) every broker probe
// escapes, with the broker's record confirming it from the host: a lifetime
// of "never", out-of-scope uses accepted, the replay after teardown
// accepted, the token served past the revocation bound (the delay named).
func TestBrokerTokenNegativeControl(t *testing.T) {
	rec := runBrokerProbes(t, "weak.yaml", probes.Escaped)
	for _, res := range rec.Results {
		for _, it := range res.Evidence {
			if it.Source == "broker" && it.Indicates != probes.Escaped {
				t.Errorf("%s: the broker's record does not confirm the escape: %+v", res.Probe, it)
			}
		}
	}
}

// TestBrokerTokenPositiveControl: on the hardened reference (no network:
// the box cannot reach the broker) and the broker-only reference (the box
// reaches only the broker) every broker probe is blocked: the token lives
// no longer than the task's budget, its out-of-scope uses are refused
// (broker-only, where the box can make them) and the host's replay after
// teardown is refused as revoked, and a token the harness revokes mid-run is
// refused within the bound (broker-only, the delay measured).
func TestBrokerTokenPositiveControl(t *testing.T) {
	for _, target := range []string{"hardened.yaml", "broker-only.yaml"} {
		t.Run(target, func(t *testing.T) {
			rec := runBrokerProbes(t, target, probes.Blocked)
			for _, res := range rec.Results {
				if it, ok := hostItem(res, "broker", "replay"); ok && (it.Indicates != probes.Blocked || it.Data["reason"] != "revoked") {
					t.Errorf("replay after teardown: %+v", it)
				}
				if it, ok := hostItem(res, "broker", "revocation"); ok && target == "broker-only.yaml" && (it.Indicates != probes.Blocked || it.Data["delay_ms"] == "") {
					t.Errorf("revocation on broker-only: the broker did not refuse the revoked token within the bound: %+v", it)
				}
				if it, ok := hostItem(res, "broker", "scope"); ok && target == "broker-only.yaml" && (it.Indicates != probes.Blocked || it.Data["refused_out_of_scope"] != "3") {
					t.Errorf("scope on broker-only: the broker did not refuse the three out-of-scope uses: %+v", it)
				}
			}
		})
	}
}
