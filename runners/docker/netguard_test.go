package docker

import (
	"errors"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestCheckNetworkArgv: the guard finds a network probe in the parameters'
// probes list (as the engine sends it) and as a word of its own, refuses
// parameters it cannot read, and lets a batch without network probes by.
func TestCheckNetworkArgv(t *testing.T) {
	params := func(ids ...string) string {
		doc, err := probes.Params{Token: "t", Probes: ids}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	bin := "/.sandcheck/sandcheck-probe"
	for _, tc := range []struct {
		name    string
		argv    []string
		refused bool
	}{
		{"list, no network probe", []string{bin, "run", "--token", "t", "--params", params("privilege.seccomp", "host.engine-socket")}, false},
		{"list, a network probe last", []string{bin, "run", "--token", "t", "--params", params("privilege.seccomp", "metadata.aws-imdsv1")}, true},
		{"word", []string{bin, "run", "--token", "t", "egress.tcp-ports"}, true},
		{"unreadable parameters", []string{bin, "run", "--token", "t", "--params", `{"probes":["metadata.aws-imdsv1"]`}, true},
		{"--params without a value", []string{bin, "run", "--token", "t", "--params"}, true},
		{"no parameters", []string{bin, "hold"}, false},
	} {
		err := checkNetworkArgv(tc.argv)
		if got := errors.Is(err, ErrNetworkProbeRefused); got != tc.refused {
			t.Errorf("%s: refused %v (%v), want %v", tc.name, got, err, tc.refused)
		}
	}
}
