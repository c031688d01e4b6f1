package yamlbound

import (
	"strings"
	"testing"
)

// FuzzCheck: the scan never panics, stays within its limits when it passes a
// file, and passes a prefix of a refused depth no deeper than the limit.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("a:\n  b: [1, {c: d}]\n"))
	f.Add([]byte("- - - x\n"))
	f.Add([]byte("a: |\n  [[[\nb: 'x''y'\n"))
	f.Add([]byte("--- [\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, err := Check(b, Default)
		if err != nil {
			if !strings.Contains(err.Error(), "nested deeper") && !strings.Contains(err.Error(), "aliases") && !strings.Contains(err.Error(), "larger") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if sh.Depth > Default.MaxDepth || sh.Aliases > Default.MaxAliases || sh.Documents < 0 {
			t.Fatalf("passed shape %+v beyond the limits", sh)
		}
	})
}
