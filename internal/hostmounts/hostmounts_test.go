package hostmounts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnder finds a bind mount below a folder (its name with a blank, as
// mountinfo escapes it), and nothing of a folder beside it that shares its
// prefix.
func TestUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	dir := t.TempDir()
	inner := filepath.Join(dir, "a b")
	beside := dir + "-beside"
	for _, d := range []string{inner, beside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(beside) })
	for _, m := range []string{inner, beside} {
		if err := unix.Mount("/usr", m, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(m, unix.MNT_DETACH) })
	}
	got, err := Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{inner}) {
		t.Errorf("Under(%s) = %q, want [%q]", dir, got, inner)
	}
}
