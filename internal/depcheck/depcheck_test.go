package depcheck

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testLibraries are the module paths no shipped binary may link.
var testLibraries = []string{
	"github.com/testcontainers/testcontainers-go",
	"github.com/onsi/ginkgo",
	"github.com/onsi/gomega",
	"github.com/stretchr/testify",
	"github.com/gavv/httpexpect",
}

// shipped are the binaries a release carries.
var shipped = []string{"./cmd/sandcheck", "./cmd/sandcheck-probe"}

// TestNoTestLibraryLinked fails when a shipped binary links a test library,
// naming the package of ours that pulls it in.
func TestNoTestLibraryLinked(t *testing.T) {
	root := moduleRoot(t)
	for _, main := range shipped {
		deps := goList(t, root, "-deps", main)
		self := "github.com/sandcheck/sandcheck/" + strings.TrimPrefix(main, "./")
		if !slices.Contains(deps, self) {
			t.Fatalf("go list -deps %s does not list %s itself; the check would see nothing", main, self)
		}
		if bad := testLibs(deps); len(bad) > 0 {
			t.Errorf("%s links test libraries: %s\nwho imports them: %s", main, strings.Join(bad, ", "), importers(t, root, main))
		}
	}
}

// TestDetects is the check's negative control: the Ginkgo spec tree links
// Ginkgo and Gomega by design, and the same check must say so.
func TestDetects(t *testing.T) {
	deps := goList(t, moduleRoot(t), "-deps", "./suites")
	bad := testLibs(deps)
	for _, lib := range []string{"github.com/onsi/ginkgo/v2", "github.com/onsi/gomega"} {
		if !slices.Contains(bad, lib) {
			t.Errorf("the check did not find %s in ./suites (found %v); it cannot be trusted", lib, bad)
		}
	}
}

// testLibs returns the packages in deps that belong to a test library.
func testLibs(deps []string) []string {
	var out []string
	for _, p := range deps {
		for _, lib := range testLibraries {
			if p == lib || strings.HasPrefix(p, lib+"/") || strings.HasPrefix(p, lib+"@") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// importers names our packages in main's dependencies that import a test
// library directly, for the failure message.
func importers(t *testing.T, root, main string) string {
	lines := goList(t, root, "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, main)
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "github.com/sandcheck/sandcheck") {
			continue
		}
		if bad := testLibs(f[1:]); len(bad) > 0 {
			out = append(out, fmt.Sprintf("%s -> %s", f[0], strings.Join(bad, ",")))
		}
	}
	if len(out) == 0 {
		return "(only through other modules)"
	}
	return strings.Join(out, "; ")
}

// moduleRoot is the folder holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out := run(t, "", "go", "env", "GOMOD")
	if len(out) != 1 || !strings.HasSuffix(out[0], "go.mod") {
		t.Fatalf("go env GOMOD: %q", out)
	}
	return filepath.Dir(out[0])
}

func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	return run(t, dir, "go", append([]string{"list"}, args...)...)
}

// run runs a go command, bounded, and returns its output's lines.
func run(t *testing.T, dir, name string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	for l := range strings.Lines(stdout.String()) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
