package impl

import (
	"strings"
	"testing"
)

func TestParseIDMap(t *testing.T) {
	ms, err := parseIDMap(strings.NewReader("         0          0 4294967295\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("initial map: %v %v", ms, err)
	}
	if h, ok := mapToHost(ms, 0); !ok || h != 0 {
		t.Errorf("uid 0 in the initial namespace maps to %d %t, want 0", h, ok)
	}
	ms, err = parseIDMap(strings.NewReader("0 100000 65536\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := mapToHost(ms, 0); !ok || h != 100000 {
		t.Errorf("remapped root maps to %d %t, want 100000", h, ok)
	}
	if _, ok := mapToHost(ms, 70000); ok {
		t.Error("uid 70000 is outside the map but was mapped")
	}
	for _, bad := range []string{"0 0\n", "0 x 1\n", "0 0 1 2\n", "-1 0 1\n"} {
		if _, err := parseIDMap(strings.NewReader(bad)); err == nil {
			t.Errorf("malformed uid_map %q was accepted", bad)
		}
	}
}

func TestChildHelpersRefuseBadArguments(t *testing.T) {
	for _, args := range [][]string{{"euid", "x"}, {"target", "nondumpable"}, {"target", "dumpable", "999"}, {"seize"}, {"seize", "1"}, {"seize", "x"}} {
		if rc := Child(args); rc != 2 {
			t.Errorf("child %v: exit %d, want 2 (usage)", args, rc)
		}
	}
}
