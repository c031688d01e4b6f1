package policies

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/sandcheck/sandcheck/probes"
)

// catalogData is the catalog as the policy reads it (data.catalog): the
// criteria in order and, per probe, the facts a record must agree with.
func catalogData(criteria []string, specs []probes.Spec) map[string]any {
	ps := make(map[string]any, len(specs))
	for _, s := range specs {
		expect := make(map[string]any, len(s.Expect))
		for p, o := range s.Expect {
			expect[p] = string(o)
		}
		host := make([]any, len(s.Host))
		for i, h := range s.Host {
			host[i] = h
		}
		runners := make([]any, len(s.Runners))
		for i, r := range s.Runners {
			runners[i] = r
		}
		ps[s.ID] = map[string]any{
			"category":  s.Category,
			"criterion": s.Criterion,
			"severity":  s.Severity,
			"expect":    expect,
			"host":      host,
			"runners":   runners,
		}
	}
	cs := make([]any, len(criteria))
	for i, c := range criteria {
		cs[i] = c
	}
	return map[string]any{"criteria": cs, "probes": ps}
}

// ErrDeadPattern is returned by New for a profile naming a probe pattern
// that matches no probe of the catalog.
var ErrDeadPattern = errors.New("profile pattern matches no probe of the catalog")

// deadPatternsQuery lists the probe patterns of every profile that match no
// catalog probe, matched as the criteria match them (glob, "." separating
// segments).
const deadPatternsQuery = `[sprintf("profile %s: %s pattern %q", [name, kind, p]) |
	some name, prof in data.sandcheck.profiles.profiles
	some kind in ["must_block", "must_succeed"]
	some p in object.get(prof, kind, [])
	count({id | some id, _ in data.catalog.probes; glob.match(p, ["."], id)}) == 0
]`

// profilesPackage finds the modules of the profiles' package (and its
// subpackages); the check needs only them, which keeps it from compiling the
// whole policy a second time.
var profilesPackage = regexp.MustCompile(`(?m)^package\s+sandcheck\.profiles(\.|\s|$)`)

// checkProfilePatterns evaluates the profiles of the loaded policy (base:
// its data and settings; mods: its modules) against the catalog and fails on
// every pattern that names no probe: a must_block or must_succeed list
// naming nothing would make the profile's requirement hold vacuously. When
// the profiles' modules refer to no other package (the embedded ones do not)
// it compiles only them, not the whole policy a second time.
func checkProfilePatterns(ctx context.Context, base []func(*rego.Rego), mods []module) error {
	var own []func(*rego.Rego)
	var files []string
	alone := true
	for _, m := range mods {
		if profilesPackage.MatchString(m.src) {
			files = append(files, m.file)
			own = append(own, rego.Module(m.file, m.src))
			alone = alone && selfContained(m)
		}
	}
	if !alone {
		own = own[:0]
		for _, m := range mods {
			own = append(own, rego.Module(m.file, m.src))
		}
	}
	opts := append(slices.Clone(base), rego.Query(deadPatternsQuery))
	rs, err := rego.New(append(opts, own...)...).Eval(ctx)
	if err != nil {
		return fmt.Errorf("checking the profiles' probe patterns: %w", err)
	}
	var dead []string
	for _, r := range rs {
		for _, e := range r.Expressions {
			items, _ := e.Value.([]any)
			for _, it := range items {
				if s, ok := it.(string); ok {
					dead = append(dead, s)
				}
			}
		}
	}
	if len(dead) == 0 {
		return nil
	}
	slices.Sort(dead)
	return fmt.Errorf("loading the profiles (package sandcheck.profiles, %s): %s: %w",
		strings.Join(files, ", "), strings.Join(dead, "; "), ErrDeadPattern)
}

// selfContained reports whether a module refers to data only under its own
// package (and imports nothing else), so that it evaluates the same without
// the policy's other modules. A module that does not parse is not.
func selfContained(m module) bool {
	mod, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return false
	}
	own := mod.Package.Path
	for _, imp := range mod.Imports {
		if ref, ok := imp.Path.Value.(ast.Ref); !ok || ref.HasPrefix(ast.DefaultRootRef) && !ref.HasPrefix(own) {
			return false
		}
	}
	ok := true
	ast.WalkRefs(mod, func(r ast.Ref) bool {
		if r.HasPrefix(ast.DefaultRootRef) && !r.HasPrefix(own) {
			ok = false
		}
		return !ok
	})
	return ok
}
