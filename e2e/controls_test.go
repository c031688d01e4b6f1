package e2e

import (
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// negativeWant is what the negative control (the weak reference) must give a
// probe: escaped, or not-applicable for an informational probe, which
// attempts nothing. False means the probe has no negative control; its spec
// must say why.
func negativeWant(s probes.Spec) (probes.Outcome, bool) {
	if s.Informational {
		return probes.NotApplicable, true
	}
	if n, _ := s.Controls(); n != "" {
		return "", false
	}
	return probes.Escaped, true
}

// positiveWant is what the positive controls (the hardened references, runc
// and runsc) must give a probe: what the profile expects (blocked for an
// attempt, escaped for a workload that must go through). False means the
// probe has no positive control; its spec must say why.
func positiveWant(profile string) func(probes.Spec) (probes.Outcome, bool) {
	return func(s probes.Spec) (probes.Outcome, bool) {
		if s.Informational {
			return probes.NotApplicable, true
		}
		if _, p := s.Controls(); p != "" {
			return "", false
		}
		return s.Expected(profile), true
	}
}

// TestEveryProbeHasControls holds the catalog to its claim: a probe without a
// recorded reason is proven, so the end-to-end controls must demand that the
// weak reference lets it through and that the hardened references settle it
// (blocked, or a workload's escaped). It runs in -short mode: it reads only
// the catalog and the controls' own expectations, so `sandcheck probes list`
// cannot call a probe proven that the end-to-end tests do not prove.
func TestEveryProbeHasControls(t *testing.T) {
	unproven := 0
	for _, s := range probes.Catalog() {
		neg, pos := s.Controls()
		if neg != "" || pos != "" {
			unproven++
			t.Logf("%s is unproven: negative %q, positive %q", s.ID, neg, pos)
		}
		if w, ok := negativeWant(s); neg == "" && (!ok || w != probes.Escaped) {
			t.Errorf("%s: the weak reference does not have to let it through (%q, %t), and its spec records no reason", s.ID, w, ok)
		}
		for _, profile := range []string{"no-network-transform"} {
			w, ok := positiveWant(profile)(s)
			if pos == "" && (!ok || !w.Conclusive()) {
				t.Errorf("%s: the hardened references do not have to settle it for %s (%q, %t), and its spec records no reason", s.ID, profile, w, ok)
			}
			if pos == "" && w == probes.Escaped && s.Category != "workload" {
				t.Errorf("%s: only workloads may be expected to get through on the hardened references, it expects %s", s.ID, w)
			}
		}
		if neg != "" && s.Informational {
			// An informational probe is still checked: it must attempt
			// nothing on either control.
			if w, ok := negativeWant(s); !ok || w != probes.NotApplicable {
				t.Errorf("%s: informational, but the weak control expects %q", s.ID, w)
			}
		}
	}
	t.Logf("%d probes, %d unproven", len(probes.Catalog()), unproven)
}
