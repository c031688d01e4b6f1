package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorTarget: doctor --target fails (exit 2) on a target file that
// `targets validate` refuses, naming the file's error, and on a valid file
// reports it ok with the probe binary a run would deliver.
func TestDoctorTarget(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nrunner: nosuchrunner\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := exitOf(t, testRoot(), "doctor", "--target", bad, "--output=json")
	if code != exitHarness || !strings.Contains(out, `"name": "target"`) || !strings.Contains(out, "nosuchrunner") {
		t.Errorf("doctor --target on a bad file: exit %d\n%s", code, out)
	}
	probe := filepath.Join(t.TempDir(), "sandcheck-probe")
	if err := os.WriteFile(probe, []byte("not an executable"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out = exitOf(t, testRoot(), "doctor", "--target", "../../fixtures/targets/process.yaml", "--probe-binary", probe, "--output=json")
	if code != exitHarness || !strings.Contains(out, "probe") {
		t.Errorf("doctor --target with an unusable probe binary: exit %d\n%s", code, out)
	}
}
