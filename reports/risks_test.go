package reports

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/runners"
)

func riskByID(rs []Risk, id string) (Risk, bool) {
	for _, r := range rs {
		if r.ID == id {
			return r, true
		}
	}
	return Risk{}, false
}

// The register follows the record: runc leaves shared-kernel exposure that
// a profile admitting shared kernels accepts and high-risk-code does not;
// gVisor reduces it; a mounted engine socket turns the management plane
// into a finding; a remote platform adds vendor administrator access;
// untested probes and waivers appear with their owners.
func TestRisksFollowTheRecord(t *testing.T) {
	rec := weakRecord() // docker/runc, profile high-risk-code
	k, ok := riskByID(Risks(rec), "shared-kernel-exposure")
	if !ok || k.Accepted || !strings.Contains(k.Exposure, "host kernel 6.1.0-28-amd64") || k.Owner == "" {
		t.Errorf("runc under high-risk-code: %+v", k)
	}
	rec.Target.Profile = "no-network-transform"
	// The weak run failed hardened-runtime and default-deny-egress: the
	// register must not accept a risk on restrictions the verdict says broke.
	k, _ = riskByID(Risks(rec), "shared-kernel-exposure")
	if k.Accepted || !strings.Contains(k.Open, "criterion hardened-runtime is fail") || !strings.Contains(k.Open, "default-deny-egress is") ||
		slices.ContainsFunc(k.Restrictions, func(s string) bool { return strings.Contains(s, "network none") }) {
		t.Errorf("failed criteria still accept the risk or list the broken restriction: %+v", k)
	}
	ok2 := passing(rec)
	if k, _ := riskByID(Risks(ok2), "shared-kernel-exposure"); !k.Accepted || k.Open != "" || !slices.Contains(k.Restrictions, "profile no-network-transform: network none") {
		t.Errorf("a profile admitting shared kernels, every criterion held, does not accept the risk: %+v", k)
	}
	gv := passing(hardenedRecord()) // runsc
	if k, _ := riskByID(Risks(gv), "shared-kernel-exposure"); !strings.Contains(k.Title, "user-space kernel") || !k.Accepted {
		t.Errorf("gVisor: %+v", k)
	}

	rec.Sandboxes = []evidence.Sandbox{{ID: "s1", View: &runners.RuntimeView{Seccomp: "unconfined",
		Mounts: []runners.Mount{{Type: "bind", Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock"}}}}}
	if m, _ := riskByID(Risks(rec), "management-plane-compromise"); m.Accepted || !strings.Contains(m.Exposure, "a finding") {
		t.Errorf("engine socket mounted: %+v", m)
	}
	if _, ok := riskByID(Risks(rec), "vendor-administrator-access"); ok {
		t.Error("a local runner carries vendor administrator access")
	}

	remote := passing(hardenedRecord())
	remote.Runner, remote.Runtime = "opensandbox", ""
	remote.Results = append(remote.Results, res("egress.icmp", "default-deny-egress", outcomeNotTested, "no network view"))
	remote.Verdict.Waivers = []evidence.WaiverUse{{ID: "w.yaml:3", Criterion: "attributable-policy", Owner: "vendor-mgmt", Expires: "2030-01-01", Reason: "contract", Waived: []string{"x"}}}
	rs := Risks(remote)
	v, ok := riskByID(rs, "vendor-administrator-access")
	if !ok || !v.Accepted || !slices.Contains(v.Waivers, "w.yaml:3 (owner vendor-mgmt, expires 2030-01-01)") {
		t.Errorf("remote platform: %+v", v)
	}
	if u, ok := riskByID(rs, "untested-controls"); !ok || !strings.Contains(u.Exposure, "egress.icmp") {
		t.Errorf("untested controls: %+v", u)
	}
	if w, ok := riskByID(rs, "waiver w.yaml:3"); !ok || w.Owner != "vendor-mgmt" {
		t.Errorf("waiver row: %+v", w)
	}
	if k, _ := riskByID(rs, "shared-kernel-exposure"); k.Accepted {
		t.Errorf("an unknown isolation class is accepted: %+v", k)
	}
}

// passing is a copy of rec whose verdict says every criterion passed.
func passing(rec *evidence.Record) *evidence.Record {
	out := *rec
	v := *rec.Verdict
	v.Criteria = slices.Clone(v.Criteria)
	for i := range v.Criteria {
		v.Criteria[i].Status = evidence.StatusPass
	}
	out.Verdict = &v
	return &out
}
