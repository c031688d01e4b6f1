package policies

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

const userHead = "package sandcheck.user.team\n\nimport rego.v1\n\n"

// TestUserPassForBuiltinCriterionIsRefusedAtLoad: a user pass_* rule naming
// a built-in criterion turned a not-tested criterion into a pass and took
// away its "was not tested" warning; now each form of it is refused at
// load, naming the file and the rule's line.
func TestUserPassForBuiltinCriterionIsRefusedAtLoad(t *testing.T) {
	for name, c := range map[string]struct{ src, says string }{
		"literal": {userHead + "pass_forged contains {\"criterion\": \"usability\", \"msg\": \"fine\"}\n",
			":5: rule pass_forged names the built-in criterion usability"},
		"bare pass, else branch": {userHead + "pass := [{\"criterion\": \"team\", \"msg\": \"m\"}] if false\n\nelse := [{\"criterion\": \"verified-teardown\", \"msg\": \"m\"}]\n",
			":7: rule pass names the built-in criterion verified-teardown"},
		"integrity": {userHead + "pass_x contains {\"criterion\": \"record-integrity\", \"msg\": \"m\"}\n",
			":5: rule pass_x names the built-in criterion record-integrity"},
		"computed criterion": {userHead + "pass_all contains {\"criterion\": c, \"msg\": \"m\"} if {\n\tsome c in data.catalog.criteria\n}\n",
			":5: rule pass_all computes its criterion"},
		"computed finding": {userHead + "pass_all contains f if {\n\tsome c in data.catalog.criteria\n\tf := {\"criterion\": c, \"msg\": \"m\"}\n}\n",
			":5: rule pass_all computes its finding"},
	} {
		dir := userDir(t, "team.rego", c.src)
		_, err := New(WithPolicies(dir))
		want := filepath.Join(dir, "team.rego") + c.says
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "never a pass") {
			t.Errorf("%s: New = %v, want a refusal containing %q", name, err, want)
		}
	}
}

// TestUserPassForOwnCriterionStands: a pass for a criterion of the team's
// own (or a plain string, criterion user-policy) still loads and grades.
func TestUserPassForOwnCriterionStands(t *testing.T) {
	dir := userDir(t, "team.rego", userHead+"pass_ours contains {\"criterion\": \"team-ci-only\", \"msg\": \"ran in CI\"}\n\npass_plain contains \"ok\"\n")
	g := newGrader(t, WithPolicies(dir))
	v := grade(t, g, loadRun(t, "hardened"))
	if c := criterion(t, v, "team-ci-only"); c.Status != evidence.StatusPass {
		t.Errorf("team-ci-only %s %q, want pass", c.Status, c.Reasons)
	}
}

// TestUserPassThroughDataIsRefused: a pass finding the loader cannot see
// (nested in a rule's value, which release.rego's walk reads as a pass_
// rule) is dropped from the grading and the grading is refused, naming
// the rule's file and line; before, it passed a not-tested criterion.
func TestUserPassThroughDataIsRefused(t *testing.T) {
	dir := userDir(t, "team.rego", userHead+"# a hidden pass\nnested := {\"pass_x\": [{\"criterion\": \"usability\", \"msg\": \"m\"}]}\n")
	g := newGrader(t, WithPolicies(dir))
	rec := loadRun(t, "hardened")
	var kept []evidence.Result
	for _, r := range rec.Results {
		if r.Criterion != "usability" {
			kept = append(kept, r)
		}
	}
	rec.Results = kept
	_, err := g.Grade(context.Background(), rec)
	want := filepath.Join(dir, "team.rego") + ":6: data.sandcheck.user.team.nested.pass_x gives a pass for the built-in criterion usability"
	if !errors.Is(err, ErrUserPolicy) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Grade = %v, want a refusal containing %q", err, want)
	}
}
