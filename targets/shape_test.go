package targets

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const minimal = "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n"

// TestDeepNestingIsBounded: 100k levels in a 200 KB file took the YAML parser
// 15 GB and 50 s before the shape check; now it is refused at once.
func TestDeepNestingIsBounded(t *testing.T) {
	for name, src := range map[string]string{
		"flow":  minimal + "description: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n",
		"block": minimal + "labels:\n" + strings.Repeat("- ", 100000) + "x\n",
	} {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		_, err := Parse("t.yaml", []byte(src))
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t.yaml:") || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
			t.Errorf("%s: got %v", name, err)
		}
		if d, mb := time.Since(t0), (after.TotalAlloc-before.TotalAlloc)>>20; d > 2*time.Second || mb > 64 {
			t.Errorf("%s: took %s and %d MB", name, d, mb)
		}
	}
}

// TestMultiDocumentTargetIsRefused: before, only the first document ran.
func TestMultiDocumentTargetIsRefused(t *testing.T) {
	_, err := Parse("t.yaml", []byte(minimal+"---\n"+strings.Replace(minimal, "runc", "runsc", 1)))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t.yaml: holds 2 YAML documents") {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse("t.yaml", []byte("---\n"+minimal)); err != nil {
		t.Fatalf("one document after a marker: %v", err)
	}
}

// TestEmptyTargetSaysSo: before, an empty file said only "EOF".
func TestEmptyTargetSaysSo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty.yaml")
	for _, src := range []string{"", "\n\n", "# just a comment\n", "---\n"} {
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p+": the file is empty") {
			t.Errorf("%q: got %v", src, err)
		}
	}
}
