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

// TestList reads the root's mount and a read-only bind with its type.
func TestList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	dir := t.TempDir()
	if err := unix.Mount("/usr", dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	ms, err := List()
	if err != nil {
		t.Fatal(err)
	}
	root := slices.IndexFunc(ms, func(m Mount) bool { return m.Target == "/" })
	bind := slices.IndexFunc(ms, func(m Mount) bool { return m.Target == dir })
	if root < 0 || ms[root].FSType == "" {
		t.Errorf("no root mount with a type in %+v", ms)
	}
	if bind < 0 || !ms[bind].ReadOnly {
		t.Errorf("the read-only bind at %s is not listed read-only: %+v", dir, ms)
	}
}
