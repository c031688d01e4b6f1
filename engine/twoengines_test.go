package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/engine"
	_ "github.com/sandcheck/sandcheck/runners/all"
)

// realRunPrereqs skips where a real run cannot happen at all (-short, not
// root) and fails where it should but cannot (no probe binary built).
func realRunPrereqs(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real sandboxes; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root and a Docker engine")
	}
	bin := os.Getenv("SANDCHECK_BIN")
	if bin == "" {
		bin = "../bin"
	}
	p, err := filepath.Abs(filepath.Join(bin, "sandcheck-probe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("probe binary not built (run `make build`): %v", err)
	}
	return p
}

// Two engines run at once in one process, each to a complete, graded
// record of its own: the engine keeps no package-level state.
func TestTwoEnginesInOneProcess(t *testing.T) {
	probe := realRunPrereqs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type got struct {
		o   *engine.Outcome
		err error
	}
	var (
		wg  sync.WaitGroup
		res [2]got
	)
	globs := [2]string{"privilege.*", "host.*"}
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := engine.Run(ctx, engine.Config{TargetPath: "../fixtures/targets/hardened.yaml", OutDir: t.TempDir(),
				ProbeBinary: probe, Probes: globs[i], Version: "test", NoTrace: true})
			res[i] = got{o, err}
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("engine %d: %v", i, r.err)
		}
		rec := r.o.Record
		want, err := engine.Select(globs[i], "")
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Results) != len(want) || rec.Verdict == nil || len(r.o.HarnessErrors) > 0 {
			t.Errorf("engine %d: %d results of %d, verdict %v, harness errors %v", i, len(rec.Results), len(want), rec.Verdict != nil, r.o.HarnessErrors)
		}
		for _, res := range rec.Results {
			if m, _ := filepath.Match(globs[i], res.Probe); !m {
				t.Errorf("engine %d has a result of %s, which only the other engine ran", i, res.Probe)
			}
		}
		if _, err := os.Stat(filepath.Join(r.o.Reports[0])); err != nil {
			t.Errorf("engine %d: %v", i, err)
		}
		ids[rec.RunID] = true
	}
	if len(ids) != 2 {
		t.Errorf("run IDs %v: want two distinct runs", ids)
	}
}
