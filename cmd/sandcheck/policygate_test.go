package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/policies"
)

// TestForgedReleasePolicyStopsRunAtOnce: a --policy folder with its own
// release.rego that passes everything made `run` on the weak reference exit
// 0; now run and policy eval exit 2 naming the file and line, and run starts
// nothing (its --out folder stays empty).
func TestForgedReleasePolicyStopsRunAtOnce(t *testing.T) {
	pol := t.TempDir()
	forged := "package sandcheck.release\n\nimport rego.v1\n\nverdict := {\"pass\": true, \"criteria\": [], \"results\": [], \"warnings\": [], \"waivers\": [], \"expired_waivers\": []}\n"
	if err := os.WriteFile(filepath.Join(pol, "release.rego"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(pol, "release.rego") + ":1: package sandcheck.release is reserved"
	out := filepath.Join(t.TempDir(), "out")
	code, msg := exitOf(t, runCmd(), "--target", "../../fixtures/targets/weak.yaml", "--policy", pol, "--out-dir", out)
	if code != exitHarness || !strings.Contains(msg, want) {
		t.Errorf("run: exit %d, want 2 naming %q:\n%s", code, want, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("run wrote %s before refusing the policy (%v)", out, err)
	}
	code, msg = exitOf(t, policyEvalCmd(), "--input", "../../policies/testdata/weak.run.json", "--policy", pol)
	if code != exitHarness || !strings.Contains(msg, want) {
		t.Errorf("policy eval: exit %d, want 2 naming %q:\n%s", code, want, msg)
	}
}

// TestPolicyEvalOutNamesCurrentPolicies: the re-graded run.json names the
// policies that graded it, not the stored record's (it used to keep the old
// policy_version).
func TestPolicyEvalOutNamesCurrentPolicies(t *testing.T) {
	const team = "../../fixtures/policies/team-example"
	out := t.TempDir()
	if code, msg := exitOf(t, policyEvalCmd(), "--input", "../../policies/testdata/hardened.run.json", "--policy", team, "--out-dir", out, "--output", "json"); code != exitFail {
		t.Fatalf("policy eval: exit %d, want 1 (the team policy fails the run):\n%s", code, msg)
	}
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Tool struct {
			PolicyVersion     string `json:"policy_version"`
			UserPolicyVersion string `json:"user_policy_version"`
		} `json:"tool"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	g, err := policies.New(policies.WithPolicies(team))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Tool.PolicyVersion != policies.Version || rec.Tool.UserPolicyVersion != g.UserVersion() {
		t.Errorf("run.json names policy %q and user policy %q, want %q and %q", rec.Tool.PolicyVersion, rec.Tool.UserPolicyVersion, policies.Version, g.UserVersion())
	}
}

// TestUserPassRefusedAtLoad: a --policy folder with a pass_* rule for a
// built-in criterion turned its not-tested into pass and removed the
// warning --fail-on-warn gates on; now run and policy eval exit 2 (bad
// input) naming the file and line, and run starts nothing.
func TestUserPassRefusedAtLoad(t *testing.T) {
	pol := t.TempDir()
	src := "package sandcheck.user.team\n\nimport rego.v1\n\npass_forged contains {\"criterion\": \"usability\", \"msg\": \"fine\"}\n"
	if err := os.WriteFile(filepath.Join(pol, "team.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(pol, "team.rego") + ":5: rule pass_forged names the built-in criterion usability"
	out := filepath.Join(t.TempDir(), "out")
	code, msg := exitOf(t, runCmd(), "--target", "../../fixtures/targets/weak.yaml", "--policy", pol, "--out-dir", out)
	if code != exitHarness || !strings.Contains(msg, want) {
		t.Errorf("run: exit %d, want 2 naming %q:\n%s", code, want, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("run wrote %s before refusing the policy (%v)", out, err)
	}
	code, msg = exitOf(t, policyEvalCmd(), "--input", "../../policies/testdata/hardened.run.json", "--policy", pol, "--fail-on-warn")
	if code != exitHarness || !strings.Contains(msg, want) {
		t.Errorf("policy eval: exit %d, want 2 naming %q:\n%s", code, want, msg)
	}
}
