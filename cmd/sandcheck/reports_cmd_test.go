package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
)

// exitOf runs a command with args and returns its exit code and output.
func exitOf(t *testing.T, c *cobra.Command, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	c.SilenceErrors, c.SilenceUsage = true, true
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

func TestDiffExitCodes(t *testing.T) {
	const runs = "../../policies/testdata/"
	for _, tt := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"regression reported", []string{runs + "hardened.run.json", runs + "weak.run.json"}, exitPass, "**REGRESSION**"},
		{"regression fails with the flag", []string{"--fail-on-regression", runs + "hardened.run.json", runs + "weak.run.json"}, exitFail, "new failure(s)"},
		{"fixes are no regression", []string{"--fail-on-regression", runs + "weak.run.json", runs + "hardened.run.json"}, exitPass, "## Fixed"},
		{"material changes named", []string{runs + "hardened.run.json", runs + "hardened-gvisor.run.json"}, exitPass, "| runtime | ` runc ` | ` runsc ` |"},
		{"json", []string{"--output", "json", runs + "hardened.run.json", runs + "weak.run.json"}, exitPass, `"regressed": true`},
		{"bad format", []string{"--output", "xml", runs + "hardened.run.json", runs + "weak.run.json"}, exitHarness, "unknown format"},
		{"missing record", []string{runs + "nope.json", runs + "weak.run.json"}, exitHarness, "nope.json"},
		{"not a record", []string{"../../fixtures/targets/weak.yaml", runs + "weak.run.json"}, exitHarness, "weak.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := exitOf(t, diffCmd(), tt.args...)
			if code != tt.code || !strings.Contains(out, tt.says) {
				t.Errorf("exit %d (want %d), output lacks %q or is:\n%s", code, tt.code, tt.says, out)
			}
		})
	}
}

func TestHistoryAndCompareCommands(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"hardened", "hardened-gvisor", "weak"} {
		b, err := os.ReadFile("../../policies/testdata/" + name + ".run.json")
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, "runs", name)
		os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, "run.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out := exitOf(t, historyCmd(), filepath.Join(dir, "runs"))
	if code != exitPass || !strings.Contains(out, "3 run(s)") {
		t.Fatalf("history: exit %d: %s", code, out)
	}
	for _, f := range []string{"history.md", "history.html"} {
		if st, err := os.Stat(filepath.Join(dir, "runs", f)); err != nil || st.Size() == 0 {
			t.Errorf("history wrote no %s: %v", f, err)
		}
	}
	code, out = exitOf(t, compareCmd(), filepath.Join(dir, "runs"))
	if code != exitPass || !strings.Contains(out, "| Sandbox kind | ` docker/runc ` | ` docker/runc ` | ` docker/runsc ` |") ||
		!strings.Contains(out, "Host kernel surface") {
		t.Errorf("compare: exit %d:\n%s", code, out)
	}
	code, out = exitOf(t, compareCmd(), "--out-dir", filepath.Join(dir, "cmp"), filepath.Join(dir, "runs"))
	if _, err := os.Stat(filepath.Join(dir, "cmp", "compare.html")); code != exitPass || err != nil {
		t.Errorf("compare --out: exit %d %v: %s", code, err, out)
	}
	if code, _ := exitOf(t, historyCmd(), t.TempDir()); code != exitHarness {
		t.Errorf("history of an empty folder exits %d, want 2", code)
	}
}

// run --baseline reads its baseline before anything starts: an unreadable
// one, or --fail-on-regression without one, is exit 2 at once.
func TestRunBaselineCheckedFirst(t *testing.T) {
	const target = "../../fixtures/targets/hardened.yaml"
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"missing baseline", []string{"--target", target, "--baseline", filepath.Join(t.TempDir(), "none.json")}, "--baseline"},
		{"not a record", []string{"--target", target, "--baseline", target}, "--baseline"},
		{"regression without baseline", []string{"--target", target, "--fail-on-regression"}, "needs --baseline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := exitOf(t, runCmd(), append(tt.args, "--out-dir", t.TempDir())...)
			if code != exitHarness || !strings.Contains(out, tt.says) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, exitHarness, tt.says, out)
			}
		})
	}
}

// compareBaseline writes diff.md and reports a regression when the new run
// fails what the baseline passed (the policy fixtures: hardened, then weak).
func TestCompareBaseline(t *testing.T) {
	const runs = "../../policies/testdata/"
	dir := t.TempDir()
	for _, tt := range []struct {
		old, cur  string
		regressed bool
	}{
		{"hardened", "weak", true},
		{"weak", "hardened", false},
	} {
		old, err := reports.LoadRecord(runs + tt.old + ".run.json")
		if err != nil {
			t.Fatal(err)
		}
		cur, err := reports.LoadRecord(runs + tt.cur + ".run.json")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		got, err := compareBaseline(&out, dir, old, cur)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.regressed {
			t.Errorf("%s then %s: regressed %t, want %t (%s)", tt.old, tt.cur, got, tt.regressed, out.String())
		}
		if b, err := os.ReadFile(filepath.Join(dir, "diff.md")); err != nil || len(b) == 0 {
			t.Errorf("%s then %s: no diff.md written: %v", tt.old, tt.cur, err)
		}
	}
}
