package engine

import (
	"strings"
	"testing"
)

// TestSelect: a glob, a comma-separated list of globs and a label filter
// choose probes; a list element that matches nothing, an empty element or
// a malformed pattern is an error naming it, so a typo in a list never
// makes a run silently shorter.
func TestSelect(t *testing.T) {
	ids := func(glob, filter string) []string {
		t.Helper()
		specs, err := Select(glob, filter)
		if err != nil {
			t.Fatalf("Select(%q, %q): %v", glob, filter, err)
		}
		var out []string
		for _, s := range specs {
			out = append(out, s.ID)
		}
		return out
	}
	one := ids("host.engine-socket", "")
	if strings.Join(one, ",") != "host.engine-socket" {
		t.Errorf("one ID selects %v", one)
	}
	two := ids("host.engine-socket, syscalls.bpf", "")
	if strings.Join(two, ",") != "host.engine-socket,syscalls.bpf" {
		t.Errorf("a list of two IDs selects %v, want both in catalog order", two)
	}
	overlap := ids("syscalls.*,syscalls.bpf", "")
	if all := ids("syscalls.*", ""); len(overlap) != len(all) {
		t.Errorf("overlapping globs select %d probes, the wider glob alone %d: a probe is chosen once", len(overlap), len(all))
	}
	for _, tc := range []struct{ glob, mentions string }{
		{"host.engine-socket,host.engine-sockt", `"host.engine-sockt"`},
		{"host.engine-socket,", "empty pattern"},
		{"host.[", "syntax error"},
		{"nothing.*", "no probe matches"},
	} {
		if _, err := Select(tc.glob, ""); err == nil || !strings.Contains(err.Error(), tc.mentions) {
			t.Errorf("Select(%q): %v, want an error mentioning %s", tc.glob, err, tc.mentions)
		}
	}
}
