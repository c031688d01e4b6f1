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

// TestMirrorOnlyReachesOnlyTheMirror runs every probe on the mirror-only
// reference (the hardened settings on the harness network, egress
// mirror-only, profile package-build): the package mirror is reached, with
// the host's mirror confirming the probe's token, and every other probe,
// the other egress and metadata probes included, is blocked. Every canary
// hit of the run arrived on the mirror or the sandbox's filtering resolver.
func TestMirrorOnlyReachesOnlyTheMirror(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/mirror-only.yaml", "--quiet")
	rec := r.mustRecord(t)
	if r.code != 0 {
		t.Errorf("exit code %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rec.Target.Egress != "mirror-only" || rec.Target.Profile != "package-build" {
		t.Errorf("record target %+v, want profile package-build with egress mirror-only", rec.Target)
	}
	everyProbe(t, rec, func(s probes.Spec) probes.Outcome { return s.Expected(rec.Target.Profile) })
	if rec.Verdict == nil || !rec.Verdict.Pass {
		t.Errorf("verdict %+v: the mirror-only reference must pass", rec.Verdict)
	}
	for _, res := range rec.Results {
		if res.Probe != "egress.package-mirror" {
			continue
		}
		it, ok := hostItem(res, evidence.SourceCanary, "sink-hit")
		if !ok || it.Indicates != probes.Escaped || it.Data["destination"] != "package-mirror" {
			t.Errorf("egress.package-mirror: the mirror did not confirm the probe's token: %+v", res.Evidence)
		}
	}
	for _, h := range canaryHits(t, r.out) {
		ap, err := netip.ParseAddrPort(h.Local)
		if err != nil {
			t.Errorf("a %s hit arrived on %q", h.Service, h.Local)
			continue
		}
		switch {
		case ap.Addr() == harnessMirror && h.Service == "http-sink":
		case h.Service == "dns-filter" && ap.Port() == 53:
		default:
			t.Errorf("a %s hit arrived on %s: a mirror-only sandbox reached more than the mirror and its resolver", h.Service, h.Local)
		}
	}
}
