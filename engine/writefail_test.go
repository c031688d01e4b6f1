package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/engine"
)

// A run that cannot write its evidence is the harness's failure, never a
// verdict: a full output folder, or a report that cannot be written, is an
// error naming the file; run.json is still written where it can be.
func TestEvidenceWriteFailures(t *testing.T) {
	probe := realRunPrereqs(t)
	run := func(out string, formats []string) (*engine.Outcome, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return engine.Run(ctx, engine.Config{TargetPath: "../fixtures/targets/hardened.yaml", OutDir: out,
			ProbeBinary: probe, Probes: "privilege.*", Version: "test", NoTrace: true, Formats: formats})
	}

	t.Run("full disk", func(t *testing.T) {
		out := t.TempDir()
		// 8 KiB: evidence.jsonl outgrows it within the run.
		if b, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8k", "sandcheck-test-full", out).CombinedOutput(); err != nil {
			t.Fatalf("mounting a tiny tmpfs: %v: %s", err, b)
		}
		t.Cleanup(func() { _ = exec.Command("umount", out).Run() })
		_, err := run(out, nil)
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("run on a full disk: err %v, want one naming the lack of space", err)
		}
	})

	t.Run("report not writable", func(t *testing.T) {
		out := t.TempDir()
		// A folder where summary.md must go: the Markdown report cannot be
		// written, everything before it can.
		if err := os.Mkdir(filepath.Join(out, "summary.md"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "summary.md", "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := run(out, []string{"markdown"})
		if err == nil || !strings.Contains(err.Error(), "markdown") {
			t.Fatalf("err %v, want one naming the markdown report", err)
		}
		if _, serr := os.Stat(filepath.Join(out, "run.json")); serr != nil {
			t.Errorf("run.json not written though only markdown was asked for and the folder is writable: %v", serr)
		}
		if o == nil || o.Record == nil || o.Record.Verdict == nil {
			t.Errorf("the record should still be graded: %+v", o)
		}
	})

	t.Run("unknown format", func(t *testing.T) {
		out := t.TempDir()
		_, err := run(out, []string{"pdf"})
		if err == nil || !strings.Contains(err.Error(), `"pdf"`) {
			t.Fatalf("err %v, want the unknown format named", err)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("an unknown format must be refused before anything starts; the output folder holds %d entries", len(ents))
		}
	})
}
