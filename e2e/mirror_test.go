package e2e

import (
	"net/netip"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// harnessMirror is the package mirror's address (netharness: an HTTP sink
// the harness holds on its bridge).
var harnessMirror = netip.MustParseAddr("198.51.100.80")

// runEgressReference runs the whole catalog on one of the hardened egress
// references (fixtures/targets/NAME.yaml, egress NAME) and checks what each
// must show: exit code 0, the record's egress and profile, every probe as
// the profile expects, and a passing verdict.
func runEgressReference(t *testing.T, name, profile string) (run, *evidence.Record) {
	t.Helper()
	r := sandcheck(t, "run", "--target", "fixtures/targets/"+name+".yaml", "--quiet")
	rec := r.mustRecord(t)
	if r.code != 0 {
		t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rec.Target.Egress != name || rec.Target.Profile != profile {
		t.Errorf("record target %+v, want profile %s with egress %s", rec.Target, profile, name)
	}
	everyProbe(t, rec, func(s probes.Spec) probes.Outcome { return s.Expected(rec.Target.Profile) })
	if rec.Verdict == nil || !rec.Verdict.Pass {
		t.Errorf("verdict %+v: the %s reference must pass", rec.Verdict, name)
	}
	return r, rec
}

// confirmedHit returns the canary item of the given kind on a probe's result,
// failing the test unless the canary confirmed the probe's token reaching
// destination.
func confirmedHit(t *testing.T, rec *evidence.Record, probe, kind, destination string) evidence.Item {
	t.Helper()
	for _, res := range rec.Results {
		if res.Probe != probe {
			continue
		}
		it, ok := hostItem(res, evidence.SourceCanary, kind)
		if !ok || it.Indicates != probes.Escaped || it.Data["destination"] != destination {
			t.Fatalf("%s: the %s did not confirm the probe's token: %+v", probe, destination, res.Evidence)
		}
		return it
	}
	t.Fatalf("%s: no result", probe)
	return evidence.Item{}
}

// everyHitOn checks that every canary hit of the run arrived on the
// sandbox's filtering resolver or where allowed says; what names the allowed
// place in the error.
func everyHitOn(t *testing.T, r run, egress, what string, allowed func(h hit, local netip.AddrPort) bool) {
	t.Helper()
	for _, h := range canaryHits(t, r.out) {
		ap, err := netip.ParseAddrPort(h.Local)
		if err != nil {
			t.Errorf("a %s hit arrived on %q", h.Service, h.Local)
			continue
		}
		if (h.Service == "dns-filter" && ap.Port() == 53) || allowed(h, ap) {
			continue
		}
		t.Errorf("a %s hit arrived on %s from %s: a %s sandbox reached more than %s and its resolver", h.Service, h.Local, h.Remote, egress, what)
	}
}

// TestMirrorOnlyReachesOnlyTheMirror runs every probe on the mirror-only
// reference (the hardened settings on the harness network, egress
// mirror-only, profile package-build): the package mirror is reached, with
// the host's mirror confirming the probe's token, and every other probe,
// the other egress and metadata probes included, is blocked. Every canary
// hit of the run arrived on the mirror or the sandbox's filtering resolver.
func TestMirrorOnlyReachesOnlyTheMirror(t *testing.T) {
	r, rec := runEgressReference(t, "mirror-only", "package-build")
	confirmedHit(t, rec, "egress.package-mirror", "sink-hit", "package-mirror")
	everyHitOn(t, r, "mirror-only", "the mirror", func(h hit, local netip.AddrPort) bool {
		return local.Addr() == harnessMirror && h.Service == "http-sink"
	})
}
