package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edit is one change editedReference makes to a reference target: the
// first occurrence of old becomes new.
type edit struct{ old, new string }

// editedReference writes a copy of the reference target fixtures/targets/name
// with edits applied and its seccomp profile by absolute path, as out in a
// test folder, and returns its path. Each edit's old text must be in the
// reference: a reference that changed under a test fails it by name.
func editedReference(t *testing.T, name, out string, edits ...edit) string {
	t.Helper()
	dir, err := filepath.Abs("../fixtures/targets")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	edits = append(edits, edit{"seccomp: seccomp-default.json", "seccomp: " + filepath.Join(dir, "seccomp-default.json")})
	for _, e := range edits {
		if !strings.Contains(src, e.old) {
			t.Fatalf("the reference %s no longer has %q; update the test that edits it", name, e.old)
		}
		src = strings.Replace(src, e.old, e.new, 1)
	}
	p := filepath.Join(t.TempDir(), out)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
