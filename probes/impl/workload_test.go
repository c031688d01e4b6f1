package impl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

func TestWorkloadCompute(t *testing.T) {
	r := workloadCompute(context.Background(), probes.Params{})
	if r.Outcome != probes.Escaped || r.Evidence["rounds"] == "" {
		t.Errorf("compute: %s %s %v", r.Outcome, r.Detail, r.Evidence)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := workloadCompute(ctx, probes.Params{}); r.Outcome != probes.Blocked {
		t.Errorf("compute after the deadline: %s, want blocked", r.Outcome)
	}
}

func TestWorkloadThreads(t *testing.T) {
	r := workloadThreads(context.Background(), probes.Params{})
	if r.Outcome != probes.Escaped || r.Evidence["distinct_tids"] != "4" {
		t.Errorf("threads: %s %s %v", r.Outcome, r.Detail, r.Evidence)
	}
}

func TestWorkloadScratch(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	r := workloadScratch(context.Background(), probes.Params{Token: "t"})
	if r.Outcome != probes.Escaped {
		t.Fatalf("scratch: %s %s %v", r.Outcome, r.Detail, r.Evidence)
	}
	if left, _ := filepath.Glob(filepath.Join(r.Evidence["dir"], ".sandcheck-workload-*")); len(left) > 0 {
		t.Errorf("scratch left %v", left)
	}
}

func TestScratchRoundTripFails(t *testing.T) {
	if err := scratchRoundTrip(filepath.Join(t.TempDir(), "missing"), "f", []byte("x")); err == nil {
		t.Error("a missing folder gave no error")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if err := scratchRoundTrip(dir, "f", []byte("x")); err == nil {
			t.Error("a read-only folder gave no error")
		}
	}
}

func TestScratchDirsOrder(t *testing.T) {
	t.Setenv("TMPDIR", "/tmpdir")
	d := scratchDirs()
	if len(d) != 3 || d[0] != "/scratch" || d[1] != "/tmpdir" || d[2] != "/tmp" {
		t.Errorf("scratchDirs() = %v", d)
	}
}

// The generated program runs with the host's shell and prints what it
// computes, its token included.
func TestWorkloadRunCode(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	r := workloadRunCode(context.Background(), probes.Params{Token: "tokr"})
	if r.Outcome != probes.Escaped {
		t.Fatalf("%s %q %v", r.Outcome, r.Detail, r.Evidence)
	}
}

// The capped writer keeps its bound whatever it is given.
func TestCappedWriter(t *testing.T) {
	var b bytes.Buffer
	c := &capped{buf: &b, max: 10}
	for range 5 {
		if n, err := c.Write([]byte("0123456")); n != 7 || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
	}
	if b.Len() != 10 {
		t.Errorf("kept %d bytes, want 10", b.Len())
	}
}

// Without a shell the generated program cannot run: the workload is blocked,
// and it says what it looked for.
func TestWorkloadRunCodeWithoutShell(t *testing.T) {
	saved := runShells
	t.Cleanup(func() { runShells = saved })
	runShells = []string{filepath.Join(t.TempDir(), "no-sh")}
	r := workloadRunCode(context.Background(), probes.Params{Token: "tokr"})
	if r.Outcome != probes.Blocked || r.Evidence["looked_for"] == "" {
		t.Fatalf("%s %q %v, want blocked naming the shells looked for", r.Outcome, r.Detail, r.Evidence)
	}
}

// An interpreter that does not run the program as written (here one that
// prints a fixed answer) is not a success.
func TestWorkloadRunCodeWrongAnswer(t *testing.T) {
	saved := runShells
	t.Cleanup(func() { runShells = saved })
	fake := filepath.Join(t.TempDir(), "sh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho sum 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runShells = []string{fake}
	r := workloadRunCode(context.Background(), probes.Params{Token: "tokr"})
	if r.Outcome != probes.Inconclusive || !strings.HasPrefix(r.Evidence["output"], "sum 1") {
		t.Fatalf("%s %q %v, want inconclusive with the output", r.Outcome, r.Detail, r.Evidence)
	}
}
