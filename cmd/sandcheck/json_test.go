package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/engine"
)

// version, targets validate and doctor print one JSON document with
// --json, exiting as they do without it.
func TestJSONOutputs(t *testing.T) {
	needProbeBinary(t)
	code, out := exitOf(t, versionCmd(), "--output=json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != exitPass || err != nil || v.PolicyVersion == "" || v.RunSchema != "sandcheck.dev/run/v1" {
		t.Errorf("version --json: exit %d, %v: %s", code, err, out)
	}

	code, out = exitOf(t, targetsCmd(), "validate", "--output=json", "../../fixtures/targets/hardened.yaml", "../../fixtures/targets/missing.yaml")
	var checks []targetCheck
	if err := json.Unmarshal([]byte(strings.TrimSuffix(out, "exit code 2")), &checks); err != nil || code != exitHarness ||
		len(checks) != 2 || !checks[0].OK || checks[0].Name != "hardened-reference" || checks[1].OK || !strings.Contains(checks[1].Error, "missing.yaml") {
		t.Errorf("targets validate --json: exit %d, %v: %s", code, err, out)
	}

	code, out = exitOf(t, doctorCmd(), "--output=json")
	var d struct {
		OK      bool `json:"ok"`
		Missing int  `json:"missing"`
		Checks  []struct {
			Name, Status string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(out, "exit code 2")), &d); err != nil || len(d.Checks) == 0 {
		t.Fatalf("doctor --json: %v: %s", err, out)
	}
	if d.OK != (code == exitPass) || d.OK != (d.Missing == 0) {
		t.Errorf("doctor --json: ok %v, %d missing, exit %d", d.OK, d.Missing, code)
	}
}

// needProbeBinary: `targets validate` makes every check run makes, the probe
// binary's included. CI builds it first (make test); elsewhere the test
// says what it needs.
func needProbeBinary(t *testing.T) {
	t.Helper()
	p := engine.DefaultProbeBinary()
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI builds the probe binary before the tests, but it is not at %s: %v", p, err)
		}
		t.Skipf("targets validate checks the probe binary: run `make build` (or set SANDCHECK_BIN): %v", err)
	}
}
