package policies

import (
	"bytes"
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestRego runs the Rego tests (*_test.rego) against the embedded policy.
func TestRego(t *testing.T) {
	modules := map[string]*ast.Module{}
	for _, n := range policyFiles(true) {
		b, err := regoFS.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ast.ParseModuleWithOpts(n, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatalf("parsing %s: %v", n, err)
		}
		modules[n] = m
	}
	ch, err := tester.NewRunner().
		SetDefaultRegoVersion(ast.RegoV1).
		SetModules(modules).
		RaiseBuiltinErrors(true).
		RunTests(context.Background(), nil)
	if err != nil {
		t.Fatalf("running rego tests: %v", err)
	}
	n := 0
	for r := range ch {
		n++
		switch {
		case r.Error != nil:
			t.Errorf("%s.%s (%s): error: %v", r.Package, r.Name, r.Location, r.Error)
		case r.Fail:
			t.Errorf("%s.%s (%s): fail", r.Package, r.Name, r.Location)
		case r.Skip:
			t.Logf("%s.%s: skipped", r.Package, r.Name)
		}
	}
	if n == 0 {
		t.Fatal("no rego tests ran")
	}
	t.Logf("%d rego tests", n)
}

// TestRegoFormatted keeps the Rego as `opa fmt` writes it.
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
		if !bytes.Equal(b, want) {
			t.Errorf("%s is not formatted as opa fmt would; formatted:\n%s", n, want)
		}
	}
}
