package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandcheck/sandcheck/probes"
)

// A user policy may add denials and warnings to the built-in criteria,
// never take them away: a pass_* finding naming a built-in criterion turned
// a not-tested criterion into a pass and removed the "was not tested"
// warning --fail-on-warn gates on. So a user rule of the pass kind is
// refused at load unless it names, as a string literal in its head, a
// criterion sandcheck does not grade (or none: "user-policy"); the release
// policy drops any pass finding of a user policy for a built-in criterion
// that still reaches it (through nested data, say) and the grader refuses
// the grading (userRefusals).

// integrityCriterion is the criterion of findings about the record itself
// (release.rego's integrity); built-in like the catalog's.
const integrityCriterion = "record-integrity"

// builtinCriterion reports whether c is graded by the release policy.
func builtinCriterion(c string) bool {
	return c == integrityCriterion || slices.Contains(probes.Criteria, c)
}

// passKind reports whether a rule name is a pass finding rule, as
// release.rego's rule_kind reads it.
func passKind(name string) bool { return name == "pass" || strings.HasPrefix(name, "pass_") }

// checkUserRules refuses the pass rules of a user module that could name a
// built-in criterion, each with its file and line.
func checkUserRules(m module) error {
	pm, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return fmt.Errorf("parsing %s: %w", m.file, err)
	}
	for _, r := range pm.Rules {
		for ; r != nil; r = r.Else {
			name, ok := ruleName(r)
			if !ok || !passKind(name) {
				continue
			}
			for _, t := range []*ast.Term{r.Head.Key, r.Head.Value} {
				if t == nil {
					continue
				}
				if why := passTermProblem(t.Value); why != "" {
					line := 0
					if r.Location != nil {
						line = r.Location.Row
					}
					return fmt.Errorf("%s:%d: rule %s %s: a user policy may add denials and warnings to sandcheck's criteria, never a pass (a pass_* rule names a criterion of its own, as a string in the rule's head)", m.file, line, name, why)
				}
			}
		}
	}
	return nil
}

// ruleName is the last static part of a rule's head: the name release.rego
// reads the finding kind from.
func ruleName(r *ast.Rule) (string, bool) {
	ref := r.Head.Ref()
	if len(ref) == 0 {
		return "", false
	}
	last := ref[len(ref)-1]
	switch v := last.Value.(type) {
	case ast.Var:
		return string(v), true
	case ast.String:
		return string(v), true
	}
	// A dynamic last part (pass_x[k] := v): the part before it names
	// the rule.
	if len(ref) > 1 {
		if s, ok := ref[len(ref)-2].Value.(ast.String); ok {
			return string(s), true
		}
		if v, ok := ref[len(ref)-2].Value.(ast.Var); ok {
			return string(v), true
		}
	}
	return "", false
}

// passTermProblem says what is wrong with a pass rule's head value: "" for
// a string (criterion user-policy), or an object (or a collection of them)
// whose criterion is a string naming no built-in criterion.
func passTermProblem(v ast.Value) string {
	switch x := v.(type) {
	case ast.String, ast.Number, ast.Boolean, ast.Null:
		return ""
	case ast.Object:
		c := x.Get(ast.StringTerm("criterion"))
		if c == nil {
			return ""
		}
		s, ok := c.Value.(ast.String)
		switch {
		case !ok:
			return fmt.Sprintf("computes its criterion (%s), which could be a built-in one", c)
		case builtinCriterion(string(s)):
			return fmt.Sprintf("names the built-in criterion %s", string(s))
		}
		return ""
	case *ast.Array:
		var why string
		x.Foreach(func(t *ast.Term) {
			if why == "" {
				why = passTermProblem(t.Value)
			}
		})
		return why
	case ast.Set:
		var why string
		x.Foreach(func(t *ast.Term) {
			if why == "" {
				why = passTermProblem(t.Value)
			}
		})
		return why
	}
	return fmt.Sprintf("computes its finding (%s), whose criterion could be a built-in one", ast.NewTerm(v))
}

// refusedQuery lists the pass findings of user policies for built-in
// criteria that reached the release policy (release.rego's user_refused).
const refusedQuery = "data.sandcheck.release.user_refused"

// ErrUserPolicy is wrapped by a grading refused because a user policy
// tried to pass a built-in criterion.
var ErrUserPolicy = errors.New("user policy refused")

// userRefusals refuses the grading when a user policy's pass finding for a
// built-in criterion reached the release policy (the loader refuses the
// pass_* rules it can see; this catches the rest), naming the rule's file
// and line.
func (g *Grader) userRefusals(ctx context.Context, input map[string]any) error {
	if g.refused == nil {
		return nil
	}
	rs, err := g.evalQuery(ctx, *g.refused, input)
	if err != nil {
		return err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return fmt.Errorf("%w: listing user findings: policy gave %d results, want one", ErrPolicyRuntime, len(rs))
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	if !ok || len(list) == 0 {
		return nil
	}
	var errs []error
	for _, e := range list {
		m, _ := e.(map[string]any)
		path, _ := m["path"].([]any)
		errs = append(errs, fmt.Errorf("%s: data.%s.%s gives a pass for the built-in criterion %v (%v): a user policy may add denials and warnings to sandcheck's criteria, never a pass",
			g.locate(path), UserPackage, joinPath(path), m["criterion"], m["msg"]))
	}
	return fmt.Errorf("%w: %w", ErrUserPolicy, errors.Join(errs...))
}

func joinPath(path []any) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

// locate finds the user rule a walk path (below data.sandcheck.user)
// starts in: the module whose package and a rule's head prefix it.
// "user policy" when none does.
func (g *Grader) locate(path []any) string {
	want := append(strings.Split(UserPackage, "."), strings.Split(joinPath(path), ".")...)
	best, bestLen := "user policy", 0
	for _, m := range g.user {
		pm, err := ast.ParseModuleWithOpts(m.file, m.src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			continue
		}
		pkg := strings.Split(strings.TrimPrefix(pm.Package.Path.String(), "data."), ".")
		for _, r := range pm.Rules {
			full := append(slices.Clone(pkg), staticRef(r.Head.Ref())...)
			if len(full) > bestLen && len(full) <= len(want) && slices.Equal(full, want[:len(full)]) && r.Location != nil {
				best, bestLen = fmt.Sprintf("%s:%d", m.file, r.Location.Row), len(full)
			}
		}
	}
	return best
}

// staticRef is the leading static parts of a rule head's reference.
func staticRef(ref ast.Ref) []string {
	var out []string
	for _, t := range ref {
		switch v := t.Value.(type) {
		case ast.Var:
			out = append(out, string(v))
		case ast.String:
			out = append(out, string(v))
		default:
			return out
		}
	}
	return out
}
