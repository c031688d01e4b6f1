package all

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
)

// namedElsewhere lists, for each runner that owns its section, the Go files
// outside its package that still name it (its name as a string, or its
// package imported), each with the reason. A runner is added by touching its
// package, one line here in runners/all and its docs page: a file naming it
// anywhere else is knowledge of the runner that escaped its package.
var namedElsewhere = map[string]map[string]string{
	"bwrap": {
		"runners/all/all.go":         "the one line that builds it in",
		"targets/section.go":         "the order the unknown-runner error has always named runners in",
		"reports/compare.go":         "the comparison matrix orders and describes kinds by runner name (debt: a runner could declare its kind)",
		"reports/risks.go":           "the risk register classes runners by name (debt: a runner could declare its isolation class and locality)",
		"internal/doctor/host.go":    "not the runner: doctor looks for the bwrap program on the host",
		"internal/doctor/doctor.go":  "doctor --target maps a bwrap target to the bubblewrap check it needs (debt: a runner could declare the host programs it needs)",
		"probes/impl/fingerprint.go": "not the runner: the probe recognises a bwrap init from inside the box",
	},
	"wrapper": {
		"runners/all/all.go": "the one line that builds it in",
	},
	"process": {
		"runners/all/all.go":          "the one line that builds it in",
		"runners/bwrap/runner.go":     "bwrap reuses the process runner's host-process machinery",
		"runners/bwrap/spawn.go":      "bwrap reuses the process runner's host-process machinery",
		"runners/bwrap/args.go":       "bwrap reuses the process runner's host-process machinery (the state folder's owner)",
		"runners/bwrap/register.go":   "bwrap reuses the process runner's host-process machinery (sweeping a dead run's sandboxes)",
		"runners/command/runner.go":   "command runs the platform's tool through the process runner's bounded process.Run",
		"runners/wrapper/register.go": "wrapper reuses the process runner's host-process machinery (network namespace)",
		"runners/wrapper/runner.go":   "wrapper reuses the process runner's host-process machinery (cgroup, bounded processes)",
		"runners/wrapper/sweep.go":    "wrapper reuses the process runner's host-process machinery (removing a dead run's cgroup)",
		"targets/section.go":          "the order the unknown-runner error has always named runners in",
		"reports/compare.go":          "the comparison matrix orders and describes kinds by runner name (debt: a runner could declare its kind)",
		"reports/risks.go":            "the risk register classes runners by name (debt: a runner could declare its isolation class and locality)",
		"probes/impl/teardown.go":     "not the runner: a teardown probe's sibling sandbox is named process",
	},
}

// TestRunnersStayInTheirPackages lists, for every registered plug-in, the
// files outside its package that name it and fails on one not listed above
// (or on a listed one that no longer does, so the list shrinks as debt is
// paid).
func TestRunnersStayInTheirPackages(t *testing.T) {
	plugins := runners.Plugins()
	if len(plugins) == 0 {
		t.Fatal("no runner registered through runners.RegisterPlugin")
	}
	root := filepath.Join("..", "..")
	for _, p := range plugins {
		got, err := filesNaming(root, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		allowed := namedElsewhere[p.Name]
		t.Logf("%s is named outside runners/%s in %d files: %s", p.Name, p.Name, len(got), strings.Join(got, ", "))
		for _, f := range got {
			if _, ok := allowed[f]; !ok {
				t.Errorf("%s names the %s runner outside its package: move that knowledge into runners/%s (its config's Declared, a capability) or list the file here with the reason", f, p.Name, p.Name)
			}
		}
		for f := range allowed {
			if !slices.Contains(got, f) {
				t.Errorf("%s no longer names the %s runner: drop it from namedElsewhere", f, p.Name)
			}
		}
	}
}

// filesNaming returns the non-test Go files outside runners/<name> that hold
// the string literal "<name>" or import the runner's package.
func filesNaming(root, name string) ([]string, error) {
	var out []string
	own := filepath.Join("runners", name)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == own || (rel != "." && strings.HasPrefix(d.Name(), ".")) || d.Name() == "testdata" || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if names(f, name) {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

func names(f *ast.File, name string) bool {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); strings.HasSuffix(p, "/runners/"+name) {
			return true
		}
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && s == name {
				found = true
			}
		}
		return !found
	})
	return found
}
