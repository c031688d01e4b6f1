package e2e

import (
	"testing"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// harnessKubeAPI is the address of the harness's Kubernetes API canary.
const harnessKubeAPI = "198.51.100.43:443"

// TestKubeAPIControls runs metadata.k8s-api with both controls: on the weak
// reference it escapes, and the Kubernetes API canary itself saw the
// probe's token with the service-account token the harness planted; on the
// hardened references (runc and runsc) it is blocked and the canary saw
// nothing.
func TestKubeAPIControls(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--probes", "metadata.k8s-api")
	res := onlyResult(t, r.mustRecord(t), "metadata.k8s-api")
	if res.Outcome != probes.Escaped || res.Evidence == nil {
		t.Errorf("weak: %s (%s), want escaped", res.Outcome, res.Detail)
	}
	it, ok := hostItem(res, evidence.SourceCanary, "kube-api-hit")
	if !ok || it.Indicates != probes.Escaped || it.Data["credential"] != canary.CredentialPlanted ||
		it.Data["local"] != harnessKubeAPI || it.Data["destination"] != "kube-api" {
		t.Errorf("weak: no kube-api hit with the planted token on %s: %+v", harnessKubeAPI, res.Evidence)
	}
	for _, tg := range []string{"hardened", "hardened-gvisor"} {
		r := sandcheck(t, "run", "--target", "fixtures/targets/"+tg+".yaml", "--quiet", "--probes", "metadata.k8s-api")
		rec := r.mustRecord(t)
		res := onlyResult(t, rec, "metadata.k8s-api")
		if res.Outcome != probes.Blocked || rec.Effective(0) != probes.Blocked {
			t.Errorf("%s: %s / effective %s (%s), want blocked", tg, res.Outcome, rec.Effective(0), res.Detail)
		}
		if _, hit := hostItem(res, evidence.SourceCanary, "kube-api-hit"); hit {
			t.Errorf("%s: the kube-api canary saw the probe: %+v", tg, res.Evidence)
		}
	}
}

// onlyResult returns the record's one result, which must be probe's.
func onlyResult(t *testing.T, rec *evidence.Record, probe string) evidence.Result {
	t.Helper()
	if len(rec.Results) != 1 || rec.Results[0].Probe != probe {
		t.Fatalf("results %+v, want exactly one for %s", rec.Results, probe)
	}
	return rec.Results[0]
}
