package impl

import (
	"os"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestMain lets the test binary stand in for the probe binary when a probe
// re-executes /proc/self/exe as "child <kind>".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(Child(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// probesParams returns empty parameters for probes that take none.
func probesParams() probes.Params { return probes.Params{} }
