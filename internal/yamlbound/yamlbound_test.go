package yamlbound

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func deep(open, close string, n int) string {
	return "schema: x\nname: " + strings.Repeat(open, n) + "b" + strings.Repeat(close, n) + "\n"
}

// TestDeepNestingIsRefusedFast: 100k levels in about 200 KB, the shapes that
// took the YAML parser 15-20 GB and 20-50 s.
func TestDeepNestingIsRefusedFast(t *testing.T) {
	cases := map[string]string{
		"flow sequences": deep("[", "]", 100000),
		"flow mappings":  deep("{a: ", "}", 100000),
		"block compact":  "schema: x\nname:\n" + strings.Repeat("- ", 100000) + "x\n",
		"after marker":   "--- " + strings.Repeat("[", 100000) + "\n",
		"json key":       `{"a":"x #", "b": ` + strings.Repeat("[", 100000) + "}\n",
		"tagged quote":   "a: [!!str \"x #\", " + strings.Repeat("[", 100000) + "]\n",
		"scalar sibling": "- key: |\n  other: " + strings.Repeat("[", 100000) + "\n",
		"indentation":    indented(100),
	}
	for name, src := range cases {
		t0 := time.Now()
		_, err := Check([]byte(src), Default)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, "nested deeper than 64 levels") {
			t.Errorf("%s: got %v, want a depth error", name, err)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("%s: took %s", name, d)
		}
	}
}

func indented(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	return b.String()
}

func TestOrdinaryShapesPass(t *testing.T) {
	cases := map[string]struct {
		src   string
		depth int
	}{
		"block":              {"a:\n  b:\n    - c\n    - d: [1, 2]\n", 5},
		"brackets in quotes": {"a: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[''['\nb: \"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\\\"\"\n", 1},
		"block scalar":       {"a: |\n  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n  {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\nb: 1\n", 1},
		"comment":            {"a: 1 # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n", 1},
		"multi-line quote":   {"a: \"x\n  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n  y\"\n", 1},
	}
	for name, c := range cases {
		sh, err := Check([]byte(c.src), Default)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if sh.Depth != c.depth {
			t.Errorf("%s: depth %d, want %d", name, sh.Depth, c.depth)
		}
	}
}

func TestDocumentsAndAliases(t *testing.T) {
	cases := map[string]int{
		"a: 1\n":                  1,
		"---\na: 1\n":             1,
		"---\na: 1\n...\n":        1,
		"a: 1\n---\nb: 2\n":       2,
		"---\na: 1\n--- {b: 2}\n": 2,
		"# only a comment\n":      0,
		"":                        0,
		"a: 1\n---\n# nothing\n":  1,
		"a: \"x\n---\ny\"\n":      1,
	}
	for src, want := range cases {
		sh, err := Check([]byte(src), Default)
		if err != nil || sh.Documents != want {
			t.Errorf("%q: %d documents (%v), want %d", src, sh.Documents, err, want)
		}
	}
	laughs := "a: &a [x, x]\n"
	for i := range 20 {
		laughs += "b" + string(rune('a'+i)) + ": [*a, *a]\n"
	}
	if _, err := Check([]byte(laughs), Default); err == nil || !strings.Contains(err.Error(), "more than 16 aliases") {
		t.Errorf("40 aliases: got %v", err)
	}
	if _, err := Check([]byte(strings.Repeat("a", 100)), Limits{MaxBytes: 10, MaxDepth: 64}); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("size: got %v", err)
	}
}

// TestProjectFilesPass keeps every target and waiver the project ships within
// the limits.
func TestProjectFilesPass(t *testing.T) {
	var n int
	for _, g := range []string{"../../fixtures/targets/*.yaml", "../../fixtures/waivers/*.yaml", "../../fixtures/*/*.yaml", "../../examples/*/*.yaml"} {
		files, _ := filepath.Glob(g)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sh, err := Check(b, Default)
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
			// Kubernetes manifests (fixtures/kubernetes) are read by the
			// kubernetes runner, where several objects to a file are usual;
			// targets and waivers are one document each.
			if sh.Documents > 1 && filepath.Base(filepath.Dir(f)) != "kubernetes" {
				t.Errorf("%s: %d documents", f, sh.Documents)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no project files found")
	}
	t.Logf("%d files", n)
}
