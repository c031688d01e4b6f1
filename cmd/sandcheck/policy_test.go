package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// evalExit runs `sandcheck policy eval` with args and returns its exit code
// and output.
func evalExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	c := policyEvalCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	if err == nil {
		return exitPass, out.String()
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		return exitHarness, out.String() + err.Error()
	}
	return ee.code, out.String() + ee.Error()
}

func TestPolicyEvalExitCodes(t *testing.T) {
	const runs = "../../policies/testdata/"
	for _, tt := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"hardened passes", []string{"--input", runs + "hardened.run.json"}, exitPass, "verdict: PASS"},
		{"weak fails", []string{"--input", runs + "weak.run.json"}, exitFail, "verdict: FAIL"},
		{"warnings fail with --fail-on-warn", []string{"--input", runs + "hardened.run.json", "--fail-on-warn"}, exitFail, "--fail-on-warn"},
		{"malformed waiver", []string{"--input", runs + "hardened.run.json", "--waivers", "../../fixtures/waivers/missing-owner.yaml"}, exitHarness, "missing-owner.yaml:10"},
		{"user policy", []string{"--input", runs + "hardened.run.json", "--policy", "../../fixtures/policies/team-example"}, exitFail, "team-ci-only"},
		{"no input", nil, exitHarness, "--input is required"},
		{"not a record", []string{"--input", "../../fixtures/waivers/example.yaml"}, exitHarness, "run record"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := evalExit(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.says) {
				t.Errorf("exit %d (want %d), output lacks %q or is:\n%s", code, tt.code, tt.says, out)
			}
		})
	}
}

// TestCriterionWaiversNeedTheFlag: eleven waivers, one per criterion, were
// enough to turn the weak reference into exit 0 (issue 28). A criterion
// waiver is now refused at load (exit 2, file:line) unless the flag admits
// it, and an expiry past --waiver-max-days is refused too.
func TestCriterionWaiversNeedTheFlag(t *testing.T) {
	const runs = "../../policies/testdata/"
	soon := time.Now().AddDate(0, 0, 30).Format("2006-01-02")
	file := filepath.Join(t.TempDir(), "w.yaml")
	body := "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - criterion: hardened-runtime\n    target: weak-reference\n    owner: o@example.com\n    reason: r\n    expires: " + soon + "\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := evalExit(t, "--input", runs+"weak.run.json", "--waivers", file); code != exitHarness || !strings.Contains(out, "w.yaml:3") {
		t.Errorf("a criterion waiver without the flag: exit %d\n%s", code, out)
	}
	if code, out := evalExit(t, "--input", runs+"weak.run.json", "--waivers", file, "--allow-criterion-waivers"); code == exitHarness {
		t.Errorf("a criterion waiver with --allow-criterion-waivers was refused: exit %d\n%s", code, out)
	}
	if code, out := evalExit(t, "--input", runs+"weak.run.json", "--waivers", file, "--allow-criterion-waivers", "--waiver-max-days", "7"); code != exitHarness {
		t.Errorf("an expiry 30 days ahead under --waiver-max-days 7: exit %d\n%s", code, out)
	}
}
