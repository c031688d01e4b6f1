package policies

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// userPolicy is what one --policy path holds.
type userPolicy struct {
	modules []module
	tests   []module
	data    map[string]any
}

// loadUser reads a folder of Rego and data files, or an OPA bundle
// (.tar.gz), without compiling it; parse errors name the file and line.
func loadUser(path string) (*userPolicy, error) {
	b, err := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithSkipBundleVerification(true).AsBundle(path)
	if err != nil {
		return nil, fmt.Errorf("loading policy %s: %w", path, err)
	}
	u := &userPolicy{data: b.Data}
	for _, f := range b.Modules {
		m := module{name: filepath.Base(f.Path), file: f.Path, src: string(f.Raw)}
		if isTest(m.name) {
			u.tests = append(u.tests, m)
		} else {
			u.modules = append(u.modules, m)
		}
	}
	return u, nil
}

// assemble merges the embedded modules with the user policies in order: a
// user module named like an earlier one replaces it. Two user modules of
// the same name in one path are an error, as are conflicting data.
func assemble(paths []string) ([]module, map[string]any, error) {
	mods, _, data, err := assembleAll(paths, false)
	return mods, data, err
}

func assembleAll(paths []string, withTests bool) ([]module, []module, map[string]any, error) {
	byName := map[string]module{}
	for _, m := range builtinModules() {
		byName[m.name] = m
	}
	var tests []module
	data := map[string]any{}
	for _, p := range paths {
		u, err := loadUser(p)
		if err != nil {
			return nil, nil, nil, err
		}
		seen := map[string]bool{}
		for _, m := range u.modules {
			if seen[m.name] {
				return nil, nil, nil, fmt.Errorf("loading policy %s: two modules named %s", p, m.name)
			}
			if err := checkPackage(m, byName); err != nil {
				return nil, nil, nil, fmt.Errorf("loading policy %s: %w", p, err)
			}
			seen[m.name] = true
			byName[m.name] = m
		}
		if withTests {
			tests = append(tests, u.tests...)
		}
		for k, v := range u.data {
			if _, dup := data[k]; dup {
				return nil, nil, nil, fmt.Errorf("loading policy %s: data.%s is also given by an earlier policy", p, k)
			}
			data[k] = v
		}
	}
	mods := make([]module, 0, len(byName))
	for _, m := range byName {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].name < mods[j].name })
	return mods, tests, data, nil
}

// checkPackage keeps a user module out of the packages sandcheck grades with:
// rules added to sandcheck.release or sandcheck.criteria (a second "pass if
// true", say) would change the verdict behind the rules' back, and
// data.catalog and data.grading are the harness's. A module may replace an
// embedded module of the same file name, in that module's package; any
// other module goes in sandcheck.user (or below) or outside sandcheck.
func checkPackage(m module, embedded map[string]module) error {
	pkg, err := packageOf(m)
	if err != nil {
		return err
	}
	if prev, ok := embedded[m.name]; ok {
		want, err := packageOf(prev)
		if err == nil && pkg != want {
			return fmt.Errorf("%s replaces the embedded %s, so it must declare package %s, not %s", m.file, m.name, strings.TrimPrefix(want, "data."), strings.TrimPrefix(pkg, "data."))
		}
		return err
	}
	for _, r := range []string{"data.sandcheck", "data.catalog", "data.grading"} {
		if pkg != r && !strings.HasPrefix(pkg, r+".") {
			continue
		}
		if pkg == "data.sandcheck.user" || strings.HasPrefix(pkg, "data.sandcheck.user.") {
			return nil
		}
		return fmt.Errorf("%s: package %s is reserved for sandcheck; put rules in package sandcheck.user or below", m.file, strings.TrimPrefix(pkg, "data."))
	}
	return nil
}

// packageOf is a module's package path, e.g. "data.sandcheck.user.team".
func packageOf(m module) (string, error) {
	pm, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", m.file, err)
	}
	return pm.Package.Path.String(), nil
}
