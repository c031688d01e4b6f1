package targets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse: any bytes give a target or an error wrapping ErrInvalid, never
// a panic, and quickly (the shape check runs before the YAML parser).
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../fixtures/targets/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "---\n" + minimal))
	f.Add([]byte("a: [[[[[[[[{{{{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		t0 := time.Now()
		tg, err := Parse("fuzz.yaml", b)
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("parsing %d bytes took %s", len(b), d)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not wrapping ErrInvalid: %v", err)
			}
			return
		}
		if !hasRunnerSection(tg) || tg.Schema != Schema || tg.Digest == "" {
			t.Fatalf("accepted target without its runner's section, schema or digest: %+v", tg)
		}
	})
}

// hasRunnerSection reports whether the target carries the section its
// runner reads.
func hasRunnerSection(tg *Target) bool {
	if tg.Section != nil {
		return true
	}
	switch tg.Runner {
	case "docker":
		return tg.Docker != nil
	case "command":
		return tg.Command != nil
	case "gateway":
		return tg.Gateway != nil
	case "opensandbox":
		return tg.OpenSandbox != nil
	case "kubernetes":
		return tg.Kubernetes != nil
	}
	return false
}
