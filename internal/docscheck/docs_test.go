package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// root is the repository's top folder, two levels above this package.
const root = "../.."

// readmeMaxLines is issue 23's bound: the README starts a user in one
// screen and sends the rest to docs/.
const readmeMaxLines = 300

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(b)
}

func TestReadmeIsShort(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, readmeMaxLines)
	}
	for _, want := range []string{"make run", "make test", "## Install", "## Quick start", "## Verdicts and exit codes"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not contain %q", want)
		}
	}
}

// TestReadmeProbeCount holds every "N probes" figure in the README and the
// docs to the catalog's size.
func TestReadmeProbeCount(t *testing.T) {
	want := len(probes.Catalog())
	re := regexp.MustCompile(`\b(\d+) probes\b`)
	for _, page := range append([]string{"README.md"}, docPages(t)...) {
		text := read(t, page)
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			n, _ := strconv.Atoi(m[1])
			if n > 100 && n != want {
				t.Errorf("%s says %q; the catalog has %d probes", page, m[0], want)
			}
		}
	}
	if !strings.Contains(read(t, "README.md"), strconv.Itoa(want)+" probes") {
		t.Errorf("README.md does not state the catalog's size (%d probes)", want)
	}
}

// TestMatrixListsTheCatalog fails when docs/matrix.md was made from another
// catalog than this one: every probe has a row, and no row names a probe
// that is gone. `make matrix` regenerates it.
func TestMatrixListsTheCatalog(t *testing.T) {
	page := read(t, "docs/matrix.md")
	const begin, end = "<!-- matrix:begin", "<!-- matrix:end -->"
	i, j := strings.Index(page, begin), strings.Index(page, end)
	if i < 0 || j < i {
		t.Fatalf("docs/matrix.md has no matrix markers")
	}
	details := page[i:j]
	if k := strings.Index(details, "<details>"); k >= 0 {
		details = details[k:]
	}
	row := regexp.MustCompile("(?m)^\\| ` ([a-z0-9-]+\\.[a-z0-9.-]+) ` \\|")
	got := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(details, -1) {
		got[m[1]] = true
	}
	var missing, extra []string
	ids := map[string]bool{}
	for _, s := range probes.Catalog() {
		ids[s.ID] = true
		if !got[s.ID] {
			missing = append(missing, s.ID)
		}
	}
	for id := range got {
		if !ids[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("docs/matrix.md is stale (run `make matrix`): %d probes missing %v, %d rows for probes not in the catalog %v",
			len(missing), missing, len(extra), extra)
	}
	escaped := regexp.MustCompile(`Escaped \| (\d+) of (\d+)`)
	for _, m := range escaped.FindAllStringSubmatch(page, -1) {
		if n, _ := strconv.Atoi(m[2]); n != len(ids) {
			t.Errorf("docs/matrix.md counts %q of %d probes; the catalog has %d", m[0], n, len(ids))
		}
	}
}

// TestDocLinksResolve follows every relative Markdown link from the README
// and the docs pages to a file that exists.
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)
	for _, page := range append([]string{"README.md"}, docPages(t)...) {
		for _, m := range link.FindAllStringSubmatch(read(t, page), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Join(root, filepath.Dir(page), target)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
	}
}

// TestDocsIndexNamesEveryPage keeps the README's documentation table the
// index of docs/: a page nobody links to is a page nobody finds.
func TestDocsIndexNamesEveryPage(t *testing.T) {
	readme := read(t, "README.md")
	for _, page := range docPages(t) {
		if !strings.Contains(readme, "("+page+")") {
			t.Errorf("README.md's documentation table does not link %s", page)
		}
	}
}

func docPages(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var pages []string
	for _, m := range matches {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}
