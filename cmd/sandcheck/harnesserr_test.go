package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
)

// TestEngineFailurePrintsOnce: an engine that stopped mid-run fails every
// later probe with the same cause. Before, the run printed one
// "sandcheck: harness:" line per probe (144 in issue 16); now one line
// names the cause, how many probes it cost and the first few, and each
// other cause keeps a line of its own. The exit code stays 2.
func TestEngineFailurePrintsOnce(t *testing.T) {
	cause := "starting sandbox: creating container: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
	var errs []string
	for i := range 144 {
		errs = append(errs, fmt.Sprintf("probe family.p%03d: %s", i, cause))
	}
	errs = append(errs, "probe output.x: copying the output folder: too large", "the run ended before every selected probe ran (3 of 147 results): interrupted or timed out")
	var out, errw bytes.Buffer
	err := concludeWith(&out, &errw, &engine.Outcome{Record: &evidence.Record{}, HarnessErrors: errs}, false, newConsole(&out, false, false))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitHarness {
		t.Fatalf("exit: %v, want the harness's exit 2", err)
	}
	lines := strings.Split(strings.TrimSuffix(errw.String(), "\n"), "\n")
	want := []string{
		"sandcheck: harness: " + cause + " (144 probes: family.p000, family.p001, family.p002, family.p003, family.p004 and 139 more; every error is in run.json)",
		"sandcheck: harness: probe output.x: copying the output folder: too large",
		"sandcheck: harness: the run ended before every selected probe ran (3 of 147 results): interrupted or timed out",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), errw.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}

// TestHarnessLinesFew: a cause shared by a few probes names them all.
func TestHarnessLinesFew(t *testing.T) {
	got := harnessLines([]string{"probe a.b: boom", "probe c.d: boom"})
	if len(got) != 1 || got[0] != "boom (2 probes: a.b, c.d)" {
		t.Errorf("got %q", got)
	}
}

// TestEmptyFilesSaySo: an empty target, waiver or run record names the file
// and says it is empty, exit 2. Before, an empty run record (a --baseline,
// `policy eval --input`, `diff`) said only "EOF".
func TestEmptyFilesSaySo(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := "../../fixtures/targets/hardened.yaml"
	for _, tc := range []struct {
		name string
		cmd  *cobra.Command
		args []string
	}{
		{"target", runCmd(), []string{"--target", empty, "--out-dir", dir}},
		{"waivers", runCmd(), []string{"--target", target, "--waivers", empty, "--out-dir", dir}},
		{"baseline", runCmd(), []string{"--target", target, "--baseline", empty, "--out-dir", dir}},
		{"policy eval", policyEvalCmd(), []string{"--input", empty}},
		{"diff", diffCmd(), []string{empty, empty}},
	} {
		var out bytes.Buffer
		tc.cmd.SetOut(&out)
		tc.cmd.SetErr(&out)
		tc.cmd.SetArgs(tc.args)
		err := tc.cmd.Execute()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitHarness {
			t.Errorf("%s: exit %v, want 2", tc.name, err)
			continue
		}
		msg := out.String() + err.Error()
		if !strings.Contains(msg, empty) || !strings.Contains(msg, "the file is empty") || strings.HasSuffix(strings.TrimSpace(msg), "EOF") {
			t.Errorf("%s: %q does not name the file and say it is empty", tc.name, msg)
		}
	}
}

// TestHarnessLinesOneCauseManySandboxes: the same cause met in sandboxes of
// different names (as a stopped engine gives) is one line; a different
// cause keeps its own.
func TestHarnessLinesOneCauseManySandboxes(t *testing.T) {
	errs := []string{
		"probe r.a: starting sandbox shared: starting container sc-1-share-4312: sandbox did not start: container create: Error response from daemon: stopped",
		"probe r.b: check task: starting sandbox pair-check: starting container sc-1-pair-2cc4: sandbox did not start: container create: Error response from daemon: stopped",
		"probe r.c: starting sandbox r.c: starting container sc-1-resou-46c6: sandbox did not start: container create: Error response from daemon: stopped",
		"probe r.d: copying output: disk full",
	}
	got := harnessLines(errs)
	want := []string{
		"container create: Error response from daemon: stopped (3 probes: r.a, r.b, r.c)",
		"probe r.d: copying output: disk full",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// A command runner's create that fails the same way for every sandbox
// (issue 24: "printed the same error 105 times") names each sandbox and
// the ID the platform printed inside the cause; those differ per probe and
// are still one cause, one line, with the count.
func TestHarnessLinesSameCauseNamingEachSandbox(t *testing.T) {
	var errs []string
	for i := range 105 {
		name := fmt.Sprintf("sandcheck-20261204t040258-5ef8876a-host-p%03d", i)
		errs = append(errs, fmt.Sprintf("probe host.p%03d: starting sandbox %s: sandbox did not start: command create (platformctl) printed no sandbox ID as its last line (got \"tenant/%012x\")\na sandbox named %s may be left on the platform (the target gives no destroy_by_name step)", i, name, 0xabc000000000+i, name))
	}
	errs = append(errs, "probe output.x: copying the output folder: too large")
	lines := harnessLines(errs)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (one cause, and the other error):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "105 probes") || !strings.Contains(lines[0], "printed no sandbox ID") {
		t.Errorf("the grouped line does not give the cause and the count: %q", lines[0])
	}
	if !strings.Contains(lines[1], "too large") {
		t.Errorf("the other cause lost its line: %q", lines[1])
	}
}
