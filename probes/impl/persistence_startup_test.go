package impl

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// An existing startup file gets the line and is cut back to what it was; a
// missing one is created and removed; a missing folder is not tested.
func TestTouchStartupLeavesFilesAsTheyWere(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, ".profile")
	want := "export PATH=/bin\n"
	if err := os.WriteFile(existing, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	line := []byte("# sandcheck test\n")
	state, ok, _ := touchStartup(existing, line)
	if !ok || state != "line appended and removed" {
		t.Fatalf("existing file: state %q ok %t", state, ok)
	}
	if got, _ := os.ReadFile(existing); string(got) != want {
		t.Fatalf("existing file now holds %q, want %q", got, want)
	}
	missing := filepath.Join(dir, ".bashrc")
	if state, ok, _ := touchStartup(missing, line); !ok || state != "created with the line and removed" {
		t.Fatalf("missing file: state %q ok %t", state, ok)
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Fatalf("missing file left behind: %v", err)
	}
	if state, _, _ := touchStartup(filepath.Join(dir, "nope", ".profile"), line); state != "" {
		t.Fatalf("missing folder: state %q, want untested", state)
	}
}

// A read-only file is refused with the errno the grading needs (unless the
// test runs as root, who may write it anyway).
func TestTouchStartupRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes read-only files")
	}
	f := filepath.Join(t.TempDir(), ".profile")
	if err := os.WriteFile(f, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, ok, n := touchStartup(f, []byte("x\n")); ok || n != unix.EACCES {
		t.Fatalf("read-only file: ok %t errno %v", ok, n)
	}
}
