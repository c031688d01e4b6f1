package bounded

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadRegular: a regular file is read to one byte past the bound; a
// link to it, a FIFO (never blocked on) and a missing file are refused.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(f, 4); err != nil || string(b) != "01234" {
		t.Errorf("bound 4: %q %v, want the first 5 bytes", b, err)
	}
	if b, err := ReadRegular(f, 64); err != nil || string(b) != "0123456789" {
		t.Errorf("bound 64: %q %v, want it whole", b, err)
	}
	link := filepath.Join(dir, "link")
	fifo := filepath.Join(dir, "fifo")
	if err := os.Symlink(f, link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo, filepath.Join(dir, "none")} {
		if b, err := ReadRegular(p, 64); err == nil {
			t.Errorf("%s: read %q, want it refused", filepath.Base(p), b)
		}
	}
}
