package process

import (
	"slices"
	"testing"
)

// The probe's paths point at the probe folder on the host: the words
// under the mount and the folder the parameters name (the setuid canary
// is looked for there).
func TestRewriteProbePaths(t *testing.T) {
	got := rewriteProbePaths([]string{"/.sandcheck/sandcheck-probe", "run", "--params", `{"probe_dir":"/.sandcheck","x":"/.sandcheck/go"}`, "/.sandcheckx"}, "/run/p")
	want := []string{"/run/p/sandcheck-probe", "run", "--params", `{"probe_dir":"/run/p","x":"/run/p/go"}`, "/.sandcheckx"}
	if !slices.Equal(got, want) {
		t.Errorf("rewrite: %q, want %q", got, want)
	}
}
