package policies

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWaiverShapeIsBounded: deep nesting is refused before the YAML parser
// sees it (100k levels took it gigabytes), as are a second document and an
// empty file.
func TestWaiverShapeIsBounded(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"deep flow":  {"schema: sandcheck.dev/waivers/v1\nwaivers: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n", "w.yaml:2: nested deeper than 64 levels"},
		"deep block": {"schema: sandcheck.dev/waivers/v1\nwaivers:\n" + strings.Repeat("- ", 100000) + "x\n", "w.yaml:3: nested deeper than 64 levels"},
		"two docs":   {"schema: sandcheck.dev/waivers/v1\nwaivers: []\n---\nschema: sandcheck.dev/waivers/v1\n", "w.yaml: holds 2 YAML documents"},
		"empty":      {"", "w.yaml: the file is empty"},
	}
	for name, c := range cases {
		t0 := time.Now()
		_, err := ParseWaivers("w.yaml", []byte(c.src))
		if !errors.Is(err, ErrInvalidWaiver) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s: took %s", name, d)
		}
	}
}

// TestWaiverGlobMustMatchAProbe: a glob that matches nothing used to load
// and waive nothing, silently.
func TestWaiverGlobMustMatchAProbe(t *testing.T) {
	doc := func(p string) []byte {
		return []byte("schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: \"" + p + "\"\n    target: t\n    owner: o\n    reason: r\n    expires: 2030-01-01\n")
	}
	for p, ok := range map[string]bool{
		"metadata.*":          true,
		"syscalls.bpf":        true,
		"*.bpf":               true,
		"metadata.aws-imdsv9": false,
		"metadata*":           false, // * does not cross the '.'
		"meta.*":              false,
		"[":                   false,
	} {
		_, err := ParseWaivers("w.yaml", doc(p), WaiverClock(func() time.Time { return time.Date(2029, 12, 1, 0, 0, 0, 0, time.UTC) }))
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v", p, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "w.yaml:3: probe")):
			t.Errorf("%s: got %v", p, err)
		}
	}
}
