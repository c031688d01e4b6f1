package reports

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var goldenExt = map[string]string{"json": ".json", "junit": ".xml", "markdown": ".md", "sarif": ".sarif", "html": ".html", "risks": ".risks.json"}

// TestGolden compares every format's output for every fixture with
// testdata/<fixture><ext>; `go test ./reports -update` rewrites them.
func TestGolden(t *testing.T) {
	for _, f := range Formats() {
		w, err := ByName(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			t.Run(f+"/"+c.name, func(t *testing.T) {
				var buf bytes.Buffer
				if err := w.Write(&buf, c.rec()); err != nil {
					t.Fatalf("Write: %v", err)
				}
				path := filepath.Join("testdata", c.name+goldenExt[f])
				if *update {
					if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("reading golden file (run with -update to create it): %v", err)
				}
				if !bytes.Equal(buf.Bytes(), want) {
					t.Errorf("%s differs from %s (run with -update if the change is intended):\n%s", f, path, buf.String())
				}
			})
		}
	}
}
