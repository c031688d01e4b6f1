package engine

import (
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestGatedByPlant: a check that found nothing counts only after a plant
// phase that completed; after none, or an inconclusive one, the result is
// inconclusive and says why. A found marker, and a check that could not
// look, keep their own result.
func TestGatedByPlant(t *testing.T) {
	planted := selfReport{Outcome: probes.NotApplicable, Detail: "planted the marker in 3 place(s); the check phase decides"}
	cut := selfReport{Outcome: probes.Inconclusive, Detail: "probes did not finish within 35s"}
	refused := selfReport{Outcome: probes.Blocked, Detail: "the keyring refused the key"}
	nothing := selfReport{Outcome: probes.Blocked, Detail: "no marker from an earlier run in any writable place", Fields: map[string]string{"places": "3"}}
	found := selfReport{Outcome: probes.Escaped, Detail: "a marker planted by an earlier run survived in /hostshare"}
	for _, tt := range []struct {
		name     string
		check    selfReport
		plant    selfReport
		planted  bool
		want     probes.Outcome
		mentions string
	}{
		{"planted, nothing found", nothing, planted, true, probes.Blocked, "no marker"},
		{"plant refused, nothing found", nothing, refused, true, probes.Blocked, "no marker"},
		{"plant cut, nothing found", nothing, cut, true, probes.Inconclusive, "the plant task was inconclusive: probes did not finish within 35s"},
		{"no plant report, nothing found", nothing, selfReport{}, false, probes.Inconclusive, "gave no report"},
		{"plant cut, marker found", found, cut, true, probes.Escaped, "survived"},
		{"no plant report, check inconclusive", cut, selfReport{}, false, probes.Inconclusive, "did not finish"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := gatedByPlant(tt.check, tt.plant, tt.planted)
			if got.Outcome != tt.want || !strings.Contains(got.Detail, tt.mentions) {
				t.Errorf("got %s %q, want %s mentioning %q", got.Outcome, got.Detail, tt.want, tt.mentions)
			}
			if tt.want == probes.Inconclusive && tt.check.Outcome == probes.Blocked {
				if n := len(got.Items); n != len(tt.check.Items)+1 || got.Items[n-1].Kind != "plant-incomplete" || got.Fields["places"] != "3" {
					t.Errorf("items %+v fields %v: want the check's items and fields and one plant-incomplete item", got.Items, got.Fields)
				}
			}
		})
	}
}
