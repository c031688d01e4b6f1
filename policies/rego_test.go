package policies

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
)

var fixFormat = flag.Bool("fix", false, "rewrite the Rego files as opa fmt would")

// TestRego runs the Rego tests (rego/*_test.rego) against the embedded
// policy, the way `sandcheck policy test` runs a team's tests.
func TestRego(t *testing.T) {
	var tests []module
	for _, n := range policyFiles(true) {
		if !isTest(n) {
			continue
		}
		b, err := regoFS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, module{name: n, file: n, src: string(b)})
	}
	res, err := RunTests(context.Background(), builtinModules(), tests)
	if err != nil {
		t.Fatalf("running rego tests: %v", err)
	}
	for _, r := range res {
		switch {
		case r.Error != nil:
			t.Errorf("%s (%s): error: %v", r.Name, r.Location, r.Error)
		case r.Fail:
			t.Errorf("%s (%s): fail", r.Name, r.Location)
		}
	}
	if len(res) == 0 {
		t.Fatal("no rego tests ran")
	}
	t.Logf("%d rego tests", len(res))
}

// TestRegoFormatted keeps the Rego as `opa fmt` writes it; -fix rewrites it.
func TestRegoFormatted(t *testing.T) {
	for _, n := range policyFiles(true) {
		b, err := regoFS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		want, err := format.SourceWithOpts(n, b, format.Opts{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatalf("formatting %s: %v", n, err)
		}
		if bytes.Equal(b, want) {
			continue
		}
		if *fixFormat {
			if err := os.WriteFile(n, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is not formatted as opa fmt would (go test ./policies -run TestRegoFormatted -fix); formatted:\n%s", n, want)
	}
}

// TestRegoStrict compiles the policy and its tests as `opa check --strict`
// does: unused variables and imports, shadowed names and deprecated
// built-ins are errors.
func TestRegoStrict(t *testing.T) {
	mods := map[string]*ast.Module{}
	for _, n := range policyFiles(true) {
		b, err := regoFS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ast.ParseModuleWithOpts(n, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatalf("parsing %s: %v", n, err)
		}
		mods[n] = m
	}
	c := ast.NewCompiler().WithStrict(true).WithEnablePrintStatements(false)
	if c.Compile(mods); c.Failed() {
		t.Fatalf("strict compile: %v", c.Errors)
	}
}
