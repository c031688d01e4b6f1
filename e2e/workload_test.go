package e2e

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// runProfileReference runs the whole catalog on the reference target
// fixtures/targets/FILE.yaml and checks what a reference must show: exit
// code 0, the record's profile, every probe as the profile expects (its
// workloads escaped, every attempt blocked) and a passing verdict.
func runProfileReference(t *testing.T, file, profile string) (run, *evidence.Record) {
	t.Helper()
	r := sandcheck(t, "run", "--target", "fixtures/targets/"+file+".yaml", "--quiet")
	rec := r.mustRecord(t)
	if r.code != 0 {
		t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rec.Target.Profile != profile {
		t.Errorf("record target %+v, want profile %s", rec.Target, profile)
	}
	everyProbe(t, rec, func(s probes.Spec) probes.Outcome { return s.Expected(rec.Target.Profile) })
	if rec.Verdict == nil || !rec.Verdict.Pass {
		t.Errorf("verdict %+v: the %s reference must pass", rec.Verdict, file)
	}
	return r, rec
}

// resultOf returns a probe's result, failing the test when there is none.
func resultOf(t *testing.T, rec *evidence.Record, probe string) (evidence.Result, int) {
	t.Helper()
	for i, r := range rec.Results {
		if r.Probe == probe {
			return r, i
		}
	}
	t.Fatalf("%s: no result", probe)
	return evidence.Result{}, 0
}

// TestHighRiskReferenceRunsGeneratedCode runs every probe on the high-risk
// reference (the hardened settings under gVisor, no network, profile
// high-risk-code): the generated program runs with the right answer and
// everything else is blocked, so the profile's usability requirement is
// met by a probe that ran, not by an empty list.
func TestHighRiskReferenceRunsGeneratedCode(t *testing.T) {
	_, rec := runProfileReference(t, "high-risk-gvisor", "high-risk-code")
	r, i := resultOf(t, rec, "workload.run-generated-code")
	if rec.Effective(i) != probes.Escaped || r.Outcome != probes.Escaped {
		t.Errorf("workload.run-generated-code: %s (%s)", rec.Effective(i), r.Detail)
	}
	usability := false
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "usability" {
			usability = c.Status == evidence.StatusPass
		}
	}
	if !usability {
		t.Errorf("usability did not pass on the high-risk reference: %+v", rec.Verdict.Criteria)
	}
}

// TestPublishReferencePublishesThroughItsEndpoint runs every probe on the
// publish reference (the hardened settings on the harness network, egress
// broker-only, profile human-approved-publish): the deliverable reaches the
// publishing endpoint with the broker confirming the probe's token, and
// every canary hit of the run arrived on that endpoint or the filtering
// resolver.
func TestPublishReferencePublishesThroughItsEndpoint(t *testing.T) {
	r, rec := runProfileReference(t, "publish-broker", "human-approved-publish")
	it := confirmedHit(t, rec, "workload.publish-message", "broker-hit", "tool-broker")
	if !strings.Contains(it.Summary, "POST") {
		t.Errorf("workload.publish-message: the broker saw no POST: %s", it.Summary)
	}
	broker := netip.MustParseAddrPort(it.Data["local"])
	everyHitOn(t, r, "broker-only", "its publishing endpoint", func(h hit, local netip.AddrPort) bool {
		return local == broker && h.Service == "tool-broker"
	})
}

// TestWorkloadsConfirmedOnTheirReferences runs the workload family on each
// egress reference: the workload of the reference's profile goes through
// and the canary it needs saw the probe's token arrive at the profile's
// destination; the network workloads of the other profiles are blocked. The
// whole catalog on these references is TestMirrorOnly..., TestProxyOnly...
// and TestBrokerOnly...; this run is a subset, so its verdict is not the
// point (the other criteria are not tested) and only a harness error fails.
func TestWorkloadsConfirmedOnTheirReferences(t *testing.T) {
	for _, tc := range []struct {
		file, profile, workload, kind, destination string
	}{
		{"mirror-only", "package-build", "workload.build-from-mirror", "sink-hit", "package-mirror"},
		{"proxy-only", "mediated-browser", "workload.browse-approved-site", "proxy-hit", "browser-proxy"},
		{"broker-only", "brokered-data-task", "workload.broker-query", "broker-hit", "tool-broker"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+tc.file+".yaml", "--probes", "workload.*", "--quiet")
			rec := r.mustRecord(t)
			if r.code == 2 || len(rec.Errors) > 0 {
				t.Fatalf("exit %d, errors %v\n%s", r.code, rec.Errors, r.stderr)
			}
			if rec.Target.Profile != tc.profile {
				t.Errorf("profile %s, want %s", rec.Target.Profile, tc.profile)
			}
			confirmedHit(t, rec, tc.workload, tc.kind, tc.destination)
			for i, res := range rec.Results {
				s, ok := probes.Lookup(res.Probe)
				if !ok || !strings.HasPrefix(res.Probe, "workload.") {
					t.Errorf("%s ran in a workload-only run", res.Probe)
					continue
				}
				if want, got := s.Expected(tc.profile), rec.Effective(i); got != want {
					t.Errorf("%s on %s: %s, want %s (%s; %+v)", res.Probe, tc.file, got, want, res.Detail, res.Evidence)
				}
			}
			want := 0
			for _, s := range probes.Catalog() {
				if s.Category == "workload" {
					want++
				}
			}
			if len(rec.Results) != want {
				t.Errorf("%d results, want the %d workload probes", len(rec.Results), want)
			}
		})
	}
}

// TestWeakGVisorWorkloadsGoThrough runs the workload family on the weak
// reference under gVisor: every workload, the network ones included, goes
// through under runsc as under runc, and each canary a workload names saw
// the probe's token.
func TestWeakGVisorWorkloadsGoThrough(t *testing.T) {
	binDir(t)
	if out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output(); err != nil || !strings.Contains(string(out), `"runsc"`) {
		t.Skipf("needs the runsc runtime in the Docker engine (err %v)", err)
	}
	r := sandcheck(t, "run", "--target", weakUnderGVisor(t), "--quiet", "--probes", "workload.*")
	rec := r.mustRecord(t)
	if r.code == 2 || len(rec.Errors) > 0 {
		t.Fatalf("exit %d, errors %v\n%s", r.code, rec.Errors, r.stderr)
	}
	if len(rec.Results) == 0 {
		t.Fatal("no workload probe ran")
	}
	for i, res := range rec.Results {
		s, ok := probes.Lookup(res.Probe)
		if !ok || s.Category != "workload" {
			t.Errorf("%s ran in a workload-only run", res.Probe)
			continue
		}
		if eff := rec.Effective(i); eff != probes.Escaped {
			t.Errorf("%s under gVisor: effective %s, want escaped (%s: %s)", res.Probe, eff, res.Outcome, res.Detail)
		}
		for _, h := range s.Host {
			if name, isCanary := strings.CutPrefix(h, "canary:"); isCanary {
				if _, hit := hostItem(res, evidence.SourceCanary, name+"-hit"); !hit {
					t.Errorf("%s under gVisor: no %s canary hit with the probe's token (%+v)", res.Probe, name, res.Evidence)
				}
			}
		}
	}
}
