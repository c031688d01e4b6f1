package policies

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// storedRuns are real run records (verdict stripped) from
// `sandcheck run --target fixtures/targets/<name>.yaml`.
var storedRuns = []string{"hardened", "hardened-gvisor", "weak"}

// loadRun reads testdata/<name>.run.json strictly.
func loadRun(t testing.TB, name string) *evidence.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := DecodeRecord(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rec
}
