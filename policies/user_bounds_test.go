package policies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func userDir(t *testing.T, file, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunawayUserPolicyStopsAtItsBudget: numbers.range(1, 1e8) evaluated
// without bound before; now the grading stops at its budget with a clear
// error (a harness error, never a verdict).
func TestRunawayUserPolicyStopsAtItsBudget(t *testing.T) {
	dir := userDir(t, "slow.rego", "package sandcheck.user\n\nimport rego.v1\n\ndeny contains msg if {\n\tn := count(numbers.range(1, 1e8))\n\tn < 0\n\tmsg := \"never\"\n}\n")
	g := newGrader(t, WithPolicies(dir), WithEvalBudget(2*time.Second))
	t0 := time.Now()
	_, err := g.Grade(context.Background(), loadRun(t, "hardened"))
	if !errors.Is(err, ErrPolicyRuntime) || !strings.Contains(err.Error(), "budget of 2s") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("took %s for a 2s budget", d)
	}
}

// TestRegoRuntimeErrorIsAnError: a built-in function's error used to leave
// the rule undefined, silently dropping its deny; now grading fails.
func TestRegoRuntimeErrorIsAnError(t *testing.T) {
	dir := userDir(t, "err.rego", "package sandcheck.user\n\nimport rego.v1\n\ndeny contains msg if {\n\tto_number(input.run_id) > 0\n\tmsg := \"run id is a number\"\n}\n")
	_, err := newGrader(t, WithPolicies(dir)).Grade(context.Background(), loadRun(t, "hardened"))
	if !errors.Is(err, ErrPolicyRuntime) || !strings.Contains(err.Error(), "to_number") {
		t.Fatalf("got %v", err)
	}
}

// TestUserPolicyInReservedPackage: a module that adds "pass if true" to
// sandcheck.release (or anything to sandcheck.criteria, catalog, grading)
// is refused; sandcheck.user and unrelated packages are fine.
func TestUserPolicyInReservedPackage(t *testing.T) {
	for pkg, ok := range map[string]bool{
		"sandcheck.release":    false,
		"sandcheck.criteria":   false,
		"sandcheck.profiles":   false,
		"sandcheck":            false,
		"catalog.more":         false,
		"grading":              false,
		"sandcheck.user":       true,
		"sandcheck.user.team":  true,
		"sandcheck_helpers":    true,
		"team.lib":             true,
		"sandcheck.usertricks": false,
	} {
		dir := userDir(t, "mine.rego", "package "+pkg+"\n\nimport rego.v1\n\npass if true\n")
		_, err := New(WithPolicies(dir))
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v", pkg, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "mine.rego:1: package "+pkg+" is reserved")):
			t.Errorf("%s: got %v", pkg, err)
		}
	}
}
