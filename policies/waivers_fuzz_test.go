package policies

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParseWaivers: any bytes give checked waivers or an error wrapping
// ErrInvalidWaiver, never a panic, quickly; an accepted waiver has every
// required field and an expiry.
func FuzzParseWaivers(f *testing.F) {
	files, _ := filepath.Glob("../fixtures/waivers/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: metadata.*\n    target: t\n    owner: o\n    reason: r\n    expires: 2030-01-01\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		t0 := time.Now()
		ws, err := ParseWaivers("fuzz.yaml", b)
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("parsing %d bytes took %s", len(b), d)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidWaiver) {
				t.Fatalf("error not wrapping ErrInvalidWaiver: %v", err)
			}
			return
		}
		for _, w := range ws {
			if w.Target == "" || w.Owner == "" || w.Reason == "" || w.ExpiresAt.IsZero() || (w.Criterion == "" && w.Probe == "") {
				t.Fatalf("accepted an incomplete waiver %+v", w)
			}
		}
	})
}
