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
