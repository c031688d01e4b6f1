package bounded

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadFileStopsAtTheBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(ReadFile(p, 4)); got != "0123" {
		t.Errorf("ReadFile(4) = %q, want 0123", got)
	}
	if got := string(ReadFile(p, 100)); got != "0123456789" {
		t.Errorf("ReadFile(100) = %q, want the whole file", got)
	}
	if got := ReadFile(filepath.Join(t.TempDir(), "missing"), 4); got != nil {
		t.Errorf("ReadFile of a missing file = %q, want nil", got)
	}
}
