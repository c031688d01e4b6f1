package policies

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
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
		// A user module never takes an embedded module's place, whatever
		// its file name: the name is prefixed so it cannot collide.
		// Its digest name is its path inside the policy, so the same
		// policy checked out elsewhere has the same version.
		rel, err := filepath.Rel(path, f.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = f.Path
		}
		m := module{name: "user:" + filepath.ToSlash(rel), file: f.Path, src: string(f.Raw)}
		if isTest(f.Path) {
			u.tests = append(u.tests, m)
		} else {
			u.modules = append(u.modules, m)
		}
	}
	return u, nil
}

// assemble is the embedded modules and, apart, the user policies' modules
// and data, each checked against the reserved packages and roots.
func assemble(paths []string) (builtin, user []module, data map[string]any, err error) {
	builtin, user, _, data, err = assembleAll(paths, false)
	return builtin, user, data, err
}

func assembleAll(paths []string, withTests bool) (builtin, user, tests []module, data map[string]any, err error) {
	data = map[string]any{}
	seen := map[string]string{}
	for _, p := range paths {
		u, err := loadUser(p)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for _, m := range u.modules {
			if prev, dup := seen[m.file]; dup {
				return nil, nil, nil, nil, fmt.Errorf("loading policy %s: %s is also loaded from %s", p, m.file, prev)
			}
			if err := checkPackage(m, false); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("loading policy %s: %w", p, err)
			}
			if err := checkUserRules(m); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("loading policy %s: %w", p, err)
			}
			seen[m.file] = p
			user = append(user, m)
		}
		if withTests {
			for _, m := range u.tests {
				if err := checkPackage(m, true); err != nil {
					return nil, nil, nil, nil, fmt.Errorf("loading policy %s: %w", p, err)
				}
			}
			tests = append(tests, u.tests...)
		}
		for k, v := range u.data {
			if slices.Contains(reservedRoots, k) {
				return nil, nil, nil, nil, fmt.Errorf("loading policy %s: its data sets data.%s, which is reserved for sandcheck (user data goes under any other root)", p, k)
			}
			if _, dup := data[k]; dup {
				return nil, nil, nil, nil, fmt.Errorf("loading policy %s: data.%s is also given by an earlier policy", p, k)
			}
			data[k] = v
		}
	}
	sort.Slice(user, func(i, j int) bool { return user[i].name < user[j].name })
	return builtinModules(), user, tests, data, nil
}

// reservedRoots are the data roots the harness owns: the release policy and
// criteria (sandcheck), the probe catalog (catalog) and what the Go side
// hands the policy (grading: waivers, policy versions).
var reservedRoots = []string{"sandcheck", "catalog", "grading"}

// UserPackage is the package (and the packages below it) where user
// policies write their deny_*, warn_* ... rules; release.rego gathers them.
const UserPackage = "sandcheck.user"

// checkPackage keeps a user module out of the packages sandcheck grades
// with: a rule added to sandcheck.release or sandcheck.criteria (a second
// "pass if true", a verdict of its own) would change the verdict behind the
// criteria's back, sandcheck.profiles says what each profile must block,
// and data.catalog and data.grading are the harness's. So a user module goes
// in sandcheck.user (or below) or outside those roots. A test module
// (policy test only, never graded) may also sit in a package of its own
// whose last part ends in _test, e.g. sandcheck.team_test.
func checkPackage(m module, test bool) error {
	pm, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return fmt.Errorf("parsing %s: %w", m.file, err)
	}
	path := pm.Package.Path
	pkg := strings.TrimPrefix(path.String(), "data.")
	if pkg == UserPackage || strings.HasPrefix(pkg, UserPackage+".") {
		return nil
	}
	if test && len(path) > 2 {
		last, ok := path[len(path)-1].Value.(ast.String)
		parent := strings.TrimSuffix(pkg, "."+string(last))
		if ok && strings.HasSuffix(string(last), "_test") && (parent == "sandcheck" || !reservedPackage(parent)) {
			return nil
		}
	}
	if !reservedPackage(pkg) {
		return nil
	}
	line := 0
	if pm.Package.Location != nil {
		line = pm.Package.Location.Row
	}
	return fmt.Errorf("%s:%d: package %s is reserved for sandcheck (the release policy and its criteria cannot be replaced or added to); put rules in package %s or below", m.file, line, pkg, UserPackage)
}

// reservedPackage reports whether pkg (without "data.") is one of the
// reserved roots or below one, the user package aside.
func reservedPackage(pkg string) bool {
	for _, r := range reservedRoots {
		if pkg == r || strings.HasPrefix(pkg, r+".") {
			return pkg != UserPackage && !strings.HasPrefix(pkg, UserPackage+".")
		}
	}
	return false
}

// userDigest identifies the user policies: their modules (by file name and
// bytes) and their data. "" when there are none.
func userDigest(mods []module, data map[string]any) string {
	if len(mods) == 0 && len(data) == 0 {
		return ""
	}
	all := slices.Clone(mods)
	if len(data) > 0 {
		// encoding/json sorts map keys, so equal data hashes alike.
		b, err := json.Marshal(data)
		if err != nil {
			b = []byte(fmt.Sprintf("%v", data))
		}
		all = append(all, module{name: "data.json", src: string(b)})
	}
	return digest(all)
}

// deniedPrefixes name built-in functions a policy may not call beyond the
// nondeterministic ones (see capabilities): net.* resolves names
// (lookup_ip_addr) or expands a CIDR into as many addresses as asked.
var deniedPrefixes = []string{"net.", "http.", "opa.", "rand.", "uuid."}

// capabilities is what the policy (embedded and user modules alike) is
// compiled with: OPA's own, less every built-in that reaches the network
// or the host (http.send, net.lookup_ip_addr, opa.runtime with its
// environment, json.match_schema with its remote $refs, io.jwt.decode_verify)
// or gives a different answer each time (rand.intn, uuid.rfc4122), and with
// no host allowed for the network. A grading is a function of the record,
// the policy and the clock, which the evaluation fixes (time.now_ns is the
// grading's own time, so it stays).
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		if b.Name == "time.now_ns" {
			return false
		}
		return b.Nondeterministic || slices.ContainsFunc(deniedPrefixes, func(p string) bool { return strings.HasPrefix(b.Name, p) })
	})
	c.AllowNet = []string{}
	return c
}
