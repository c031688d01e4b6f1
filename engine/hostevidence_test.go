package engine

import (
	"testing"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// A view field the runtime could not tell indicates nothing: a Kubernetes
// pod's masked paths are the node's, and an unknown reads as none. Told,
// the same zero value is evidence.
func TestRuntimeFactUnknownIndicatesNothing(t *testing.T) {
	spec := probes.Spec{ID: "host.proc-unmasked"}
	for _, tc := range []struct {
		fact    string
		unknown []string
		want    probes.Outcome
	}{
		{"masked-paths", []string{"masked_paths"}, ""},
		{"masked-paths", nil, probes.Escaped},
		{"pids-limit", []string{"pids_limit"}, ""},
		{"pids-limit", nil, probes.Escaped},
		{"memory-limit", []string{"pids_limit"}, probes.Escaped},
	} {
		it, ok := runtimeFact(tc.fact, spec, &runners.RuntimeView{Unknown: tc.unknown})
		if !ok || it.Indicates != tc.want {
			t.Errorf("%s with unknown %v: %v %q (%s), want %q", tc.fact, tc.unknown, ok, it.Indicates, it.Summary, tc.want)
		}
	}
	for fact := range factField {
		if _, ok := runtimeFact(fact, spec, &runners.RuntimeView{}); !ok && fact != "oom" {
			t.Errorf("factField names %q, which runtimeFact does not know", fact)
		}
	}
}
