package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
