package impl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestRegistryCoversCatalog: every catalog ID has an implementation and
// there is no implementation without a catalog entry.
func TestRegistryCoversCatalog(t *testing.T) {
	var catalog []string
	for _, s := range probes.Catalog() {
		catalog = append(catalog, s.ID)
		if !Known(s.ID) {
			t.Errorf("catalog probe %s has no implementation", s.ID)
		}
	}
	for id := range registry {
		if _, ok := probes.Lookup(id); !ok {
			t.Errorf("implemented probe %s is not in the catalog", id)
		}
	}
	if got := IDs(); !slices.Equal(got, catalog) {
		t.Errorf("IDs() = %v, want the catalog order %v", got, catalog)
	}
}

func TestRunUnknownProbe(t *testing.T) {
	_, err := Run(context.Background(), "host.nope", probes.Params{})
	if !errors.Is(err, ErrUnknownProbe) {
		t.Fatalf("Run(unknown) error = %v, want ErrUnknownProbe", err)
	}
}

func TestRunFillsProbeAndValidates(t *testing.T) {
	r, err := Run(context.Background(), "privilege.seccomp", probes.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Probe != "privilege.seccomp" {
		t.Errorf("probe = %q", r.Probe)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
}

// fileFamily is the family a source file's name gives: its name up to the
// first "_" or ".go" (egress_dns_test.go and egress.go are both egress).
func fileFamily(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".go")
	family, _, _ := strings.Cut(name, "_")
	return family
}

// idFamily is a probe ID's first segment.
func idFamily(id string) string {
	family, _, _ := strings.Cut(id, ".")
	return family
}

// TestProbeIDTellsItsFile: every probe is registered by a file of its own
// family and its function is written in one (a probe in the wrong file, or
// a file registering another family's probes, fails here).
func TestProbeIDTellsItsFile(t *testing.T) {
	for id, f := range registry {
		want := idFamily(id)
		if got := fileFamily(registeredIn[id]); got != want {
			t.Errorf("probe %s is registered in %s; register it in a file named %s.go or %s_*.go",
				id, filepath.Base(registeredIn[id]), want, want)
		}
		fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer())
		if fn == nil {
			t.Errorf("probe %s: no function information", id)
			continue
		}
		file, _ := fn.FileLine(fn.Entry())
		if got := fileFamily(file); got != want {
			t.Errorf("probe %s is implemented by %s in %s; implement it in a file of the %s family",
				id, fn.Name(), filepath.Base(file), want)
		}
	}
}

// sharedFiles are the files of the package that hold no probe: the
// registry, the results and evidence helpers, the re-executed children and
// the mount table parser used by several families.
var sharedFiles = []string{"registry", "evidence", "child", "mountinfo", "main"}

// TestFilesAreNamedAfterAFamily: every file of the package, tests included,
// is named after a probe family or is one of the shared files; no *_more.go,
// no file named after an issue.
func TestFilesAreNamedAfterAFamily(t *testing.T) {
	families := map[string]bool{}
	for _, s := range probes.Catalog() {
		families[idFamily(s.ID)] = true
	}
	names, err := filepath.Glob("*.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("listing the package's files: %v (%d files)", err, len(names))
	}
	for _, name := range names {
		fam := fileFamily(name)
		switch {
		case !families[fam] && !slices.Contains(sharedFiles, fam):
			t.Errorf("%s is named after no probe family (families: %v)", name, keys(families))
		case strings.Contains(name, "_more") || strings.Contains(name, "issue"):
			t.Errorf("%s: name a file after what it holds, not %q", name, "more/issue")
		}
	}
	if _, err := os.Stat("registry.go"); err != nil {
		t.Fatalf("the test runs outside the package folder: %v", err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
