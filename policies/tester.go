package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego test rule.
type TestResult struct {
	Name     string // package-qualified rule name
	Location string // file:line
	Fail     bool
	Error    error
	Duration time.Duration
}

// Test runs the Rego tests (*_test.rego) found in paths against the
// embedded policy merged with the policies in paths (as New merges them),
// the way `opa test` would with the embedded policy on its path.
func Test(ctx context.Context, paths ...string) ([]TestResult, error) {
	builtin, user, tests, _, err := assembleAll(paths, true)
	if err != nil {
		return nil, err
	}
	mods := append(builtin, user...)
	if len(tests) == 0 {
		return nil, fmt.Errorf("testing policies %v: no *_test.rego files", paths)
	}
	return RunTests(ctx, mods, tests)
}

// RunTests compiles modules and tests strictly and runs every test rule.
func RunTests(ctx context.Context, modules, tests []module) ([]TestResult, error) {
	parsed := map[string]*ast.Module{}
	for _, m := range append(append([]module(nil), modules...), tests...) {
		pm, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("parsing policy: %w", err)
		}
		parsed[m.file] = pm
	}
	c := ast.NewCompiler().WithStrict(true).WithCapabilities(capabilities())
	ch, err := tester.NewRunner().
		SetCompiler(c).
		SetDefaultRegoVersion(ast.RegoV1).
		SetModules(parsed).
		RaiseBuiltinErrors(true).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("running policy tests: %w", err)
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Name: r.Package + "." + r.Name, Fail: r.Fail, Duration: r.Duration}
		if r.Location != nil {
			tr.Location = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		if r.Error != nil {
			tr.Error = r.Error
		}
		out = append(out, tr)
	}
	return out, nil
}
