package runners

import (
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// The needs a catalog entry may name are exactly the capabilities a runner
// can declare, and each word maps to its own field.
func TestNeedsVocabulary(t *testing.T) {
	if !slices.Equal(Needs, probes.Needs) {
		t.Fatalf("runners.Needs %v != probes.Needs %v", Needs, probes.Needs)
	}
	for _, n := range Needs {
		var c Capabilities
		if c.Has(n) {
			t.Errorf("zero capabilities have %s", n)
		}
		all := Capabilities{Network: true, Inspect: true, TaskLaunch: true, HostPID: true, CPUMeter: true, Residue: true}
		if !all.Has(n) {
			t.Errorf("full capabilities lack %s", n)
		}
	}
	c := Capabilities{Network: true}
	if got := c.Missing([]string{"network", "residue", "bogus"}); !slices.Equal(got, []string{"residue", "bogus"}) {
		t.Errorf("Missing = %v", got)
	}
}
