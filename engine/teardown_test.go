package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// TestResidueItem: what survived is escaped whatever the markers; nothing
// left reads blocked only with a marker, the plant the host saw outside the
// box before close ("seen") or no way to plant ("no-avenue"); a box with an
// avenue whose plant the host did not see, or whose look failed, gives no
// indication; a check that failed says so.
func TestResidueItem(t *testing.T) {
	clean := runners.Residue{Kind: "container", Checked: "the engine's containers"}
	left := runners.Residue{Kind: "container", Checked: "the engine's containers", Found: []string{"container x (exited)"}}
	avenue := []string{"socket /run/docker.sock bound at /var/run/docker.sock"}
	sawIt := &plantSight{seen: map[string][]string{"container": {"container x (created) carrying the token"}}}
	sawOther := &plantSight{seen: map[string][]string{"network": {"network n carrying the token"}}}
	for _, tt := range []struct {
		name         string
		r            runners.Residue
		avenues      []string
		sight        *plantSight
		indicates    probes.Outcome
		precondition string
		mentions     string
	}{
		{"left behind, seen", left, avenue, sawIt, probes.Escaped, "", "survived"},
		{"left behind, no avenue", left, nil, nil, probes.Escaped, "", "survived"},
		{"clean, seen outside first", clean, avenue, sawIt, probes.Blocked, preconditionSeen, "saw the probe's container plant"},
		{"clean, no avenue", clean, nil, nil, probes.Blocked, preconditionNoAvenue, "no way to plant"},
		{"clean, avenue, nothing seen", clean, avenue, &plantSight{seen: map[string][]string{}}, "", preconditionNone, "absence is not evidence"},
		{"clean, avenue, another kind seen", clean, avenue, sawOther, "", preconditionNone, "absence is not evidence"},
		{"clean, avenue, did not look", clean, avenue, nil, "", preconditionNone, "did not look before close"},
		{"clean, avenue, look failed", clean, avenue, &plantSight{err: errors.New("engine down")}, "", preconditionNone, "engine down"},
		{"check failed", runners.Residue{Kind: "container", Failed: "engine down"}, avenue, sawIt, "", "", "check failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			it := residueItem(tt.r, "sc0123456789ab", tt.avenues, tt.sight)
			if it.Source != "teardown" || it.Kind != "teardown.container" {
				t.Errorf("item %s/%s, want teardown/teardown.container", it.Source, it.Kind)
			}
			if it.Indicates != tt.indicates || it.Data["precondition"] != tt.precondition {
				t.Errorf("indicates %q precondition %q, want %q %q: %s", it.Indicates, it.Data["precondition"], tt.indicates, tt.precondition, it.Summary)
			}
			if !strings.Contains(it.Summary, tt.mentions) {
				t.Errorf("summary %q does not mention %q", it.Summary, tt.mentions)
			}
			// What the host saw before close stays in the item, a survivor
			// or not.
			if saw := tt.sight != nil && len(tt.sight.seen["container"]) > 0 && tt.r.Failed == ""; saw != (it.Data["seen"] != "") {
				t.Errorf("seen %q, want it kept: %v", it.Data["seen"], saw)
			}
		})
	}
}

// TestTeardownKinds lists a spec's teardown kinds and nothing else.
func TestTeardownKinds(t *testing.T) {
	got := teardownKinds(probes.Spec{Host: []string{"runtime:caps", "teardown:processes", "teardown:cgroups"}})
	if strings.Join(got, ",") != "processes,cgroups" {
		t.Errorf("teardownKinds = %v", got)
	}
}
