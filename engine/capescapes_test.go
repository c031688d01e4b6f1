package engine

import (
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// Every probe the runtime view's capabilities speak to has its entry in
// the one table (capEscapes): a new such probe must say which capability
// makes its escape.
func TestEveryCapsProbeHasItsCapabilities(t *testing.T) {
	for _, s := range probes.Catalog() {
		if slices.Contains(s.Host, "runtime:caps") {
			if _, ok := capEscapes[s.ID]; !ok {
				t.Errorf("%s reads runtime:caps but capEscapes does not say which capability makes its escape", s.ID)
			}
		}
	}
	for id := range capEscapes {
		if s, ok := probes.Lookup(id); !ok || !slices.Contains(s.Host, "runtime:caps") {
			t.Errorf("capEscapes names %s, which is no probe reading runtime:caps", id)
		}
	}
}

// Per entry: the capability that makes the escape reads escaped, and one
// that cannot make it (with every other capability dropped) reads blocked,
// never that escape.
func TestCapabilityMakesOnlyItsOwnEscape(t *testing.T) {
	cases := []struct {
		probe, makes, cannot string
	}{
		{"privilege.dangerous-caps", "SYS_MODULE", "CHOWN"},
		{"host.mknod", "MKNOD", "SYS_MODULE"},
		{"host.kallsyms", "SYSLOG", "SYS_MODULE"},
		{"host.release-agent", "SYS_ADMIN", "SYS_MODULE"},
		{"privilege.mount-fs", "SYS_ADMIN", "NET_ADMIN"},
		{"privilege.ptrace-other", "SYS_PTRACE", "SYS_MODULE"},
		{"attribution.hostname-change", "SYS_ADMIN", "SYS_PTRACE"},
	}
	if len(cases) != len(capEscapes) {
		t.Fatalf("%d cases for %d table entries: one case per entry", len(cases), len(capEscapes))
	}
	for _, c := range cases {
		spec, ok := probes.Lookup(c.probe)
		if !ok {
			t.Fatalf("no probe %s", c.probe)
		}
		for _, x := range []struct {
			add  []string
			priv bool
			want probes.Outcome
		}{
			{[]string{c.makes}, false, probes.Escaped},
			{[]string{"CAP_" + c.makes}, false, probes.Escaped},
			{[]string{"ALL"}, false, probes.Escaped},
			{nil, true, probes.Escaped},
			{[]string{c.cannot}, false, probes.Blocked},
			{nil, false, probes.Blocked},
		} {
			v := &runners.RuntimeView{CapAdd: x.add, CapDrop: []string{"ALL"}, Privileged: x.priv}
			it, ok := runtimeFact("caps", spec, v)
			if !ok || it.Indicates != x.want {
				t.Errorf("%s with cap_add %v privileged %v: %q (%s), want %s", c.probe, x.add, x.priv, it.Indicates, it.Summary, x.want)
			}
		}
	}
}
