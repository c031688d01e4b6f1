package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandcheck/sandcheck/provenance"
)

// report verify on a folder whose signed file was replaced by a symlink or
// a fifo exits 1 (a verification failure) naming the file, and returns.
func TestReportVerifyReplacedFile(t *testing.T) {
	keys := t.TempDir()
	priv, pub, err := provenance.GenerateKeys(keys, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(provenance.PasswordEnv, "pw")
	dir := t.TempDir()
	p := filepath.Join(dir, "summary.md")
	os.WriteFile(filepath.Join(dir, "run.json"), []byte(`{"run_id":"r"}`), 0o644)
	os.WriteFile(p, []byte("# ok\n"), 0o644)
	if code, out := exitOf(t, reportCmd(), "sign", dir, "--key", priv); code != exitPass {
		t.Fatalf("sign: exit %d: %s", code, out)
	}
	if code, out := exitOf(t, reportCmd(), "verify", dir, "--key", pub); code != exitPass {
		t.Fatalf("verify untouched: exit %d: %s", code, out)
	}
	elsewhere := filepath.Join(t.TempDir(), "summary.md")
	os.WriteFile(elsewhere, []byte("# ok\n"), 0o644)
	for name, replace := range map[string]func() error{
		"symlink": func() error { return os.Symlink(elsewhere, p) },
		"fifo":    func() error { return syscall.Mkfifo(p, 0o644) },
	} {
		os.Remove(p)
		if err := replace(); err != nil {
			t.Fatal(err)
		}
		code, out := exitOf(t, reportCmd(), "verify", dir, "--key", pub)
		if code != exitFail || !strings.Contains(out, "summary.md: a ") {
			t.Errorf("%s: exit %d, want %d naming summary.md:\n%s", name, code, exitFail, out)
		}
	}
}
