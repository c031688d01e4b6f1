package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/engine"
)

// poolRun is one pool's part of a fleet run.
type poolRun struct {
	Pool     string   `json:"pool"`
	Out      string   `json:"out"`
	Verdict  string   `json:"verdict"` // pass, fail, harness-error
	Failed   []string `json:"failed_criteria,omitempty"`
	Results  int      `json:"results"`
	Seconds  float64  `json:"seconds"`
	Errors   []string `json:"harness_errors,omitempty"`
	Warnings int      `json:"warnings"`
	outcome  *engine.Outcome
}

// runFleet runs a fleet target (kubernetes node pools) as one run per pool,
// all at once, each into its own folder of --out-dir, then prints and writes
// (fleet.json, fleet.md) the verdict pool by pool. Exit: 2 when any pool's
// run could not complete, else 1 when any pool fails, else 0.
func runFleet(ctx context.Context, stdout, stderr io.Writer, cfg engine.Config, pools []string, failWarn, quiet bool) error {
	runs := make([]poolRun, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		c := cfg
		c.Pool, c.OutDir, c.Progress = p, filepath.Join(cfg.OutDir, p), nil
		runs[i] = poolRun{Pool: p, Out: c.OutDir}
		wg.Go(func() {
			t0 := time.Now()
			o, err := engine.Run(ctx, c)
			r := &runs[i]
			r.Seconds, r.outcome = time.Since(t0).Seconds(), o
			if o != nil {
				r.Errors = append(r.Errors, o.HarnessErrors...)
			}
			if err != nil {
				r.Errors = append(r.Errors, err.Error())
			}
		})
	}
	wg.Wait()
	code := 0
	for i := range runs {
		r := &runs[i]
		rec := r.outcome
		switch {
		case len(r.Errors) > 0 || rec == nil || rec.Record == nil || rec.Record.Verdict == nil:
			r.Verdict, code = "harness-error", exitHarness
		default:
			v := rec.Record.Verdict
			r.Results, r.Warnings = len(rec.Record.Results), len(v.Warnings)
			for _, c := range v.Criteria {
				if c.Status != "pass" && c.Status != "waived" && c.Status != "not-tested" {
					r.Failed = append(r.Failed, c.ID+" ("+c.Status+")")
				}
			}
			r.Verdict = "pass"
			if !v.Pass || (failWarn && len(v.Warnings) > 0) {
				r.Verdict = "fail"
				if code == 0 {
					code = exitFail
				}
			}
		}
		fmt.Fprintf(stdout, "== pool %s: %s in %.1fs (%d results, reports in %s)\n", r.Pool, strings.ToUpper(r.Verdict), r.Seconds, r.Results, r.Out)
		if rec != nil && rec.Record != nil && rec.Record.Verdict != nil {
			printVerdict(stdout, rec.Record, quiet)
		}
		for _, e := range harnessLines(r.Errors) {
			fmt.Fprintf(stderr, "sandcheck: pool %s: harness: %s\n", r.Pool, e)
		}
	}
	if err := writeFleet(cfg.OutDir, runs); err != nil {
		fmt.Fprintf(stderr, "sandcheck: %v\n", err)
		code = exitHarness
	}
	switch code {
	case 0:
		fmt.Fprintf(stdout, "fleet verdict: PASS (%d pools)\n", len(runs))
		return nil
	case exitFail:
		fmt.Fprintln(stdout, "fleet verdict: FAIL")
		return &exitError{code: exitFail}
	}
	return harness(fmt.Errorf("the harness could not complete the run of every pool; evidence gathered so far is in %s", cfg.OutDir))
}

// writeFleet writes fleet.json and fleet.md, the pool-by-pool summary.
func writeFleet(dir string, runs []poolRun) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the fleet summary: %w", err)
	}
	b, err := json.MarshalIndent(map[string]any{"schema": "sandcheck.dev/fleet/v1", "pools": runs}, "", "  ")
	if err != nil {
		return fmt.Errorf("writing fleet.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing fleet.json: %w", err)
	}
	var md strings.Builder
	md.WriteString("# Fleet verdict, pool by pool\n\n| pool | verdict | results | wall (s) | criteria not passing | reports |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range runs {
		failed := strings.Join(r.Failed, ", ")
		if len(r.Errors) > 0 {
			failed = "harness: " + strings.Join(r.Errors, "; ")
		}
		fmt.Fprintf(&md, "| %s | %s | %d | %.1f | %s | %s/ |\n", r.Pool, r.Verdict, r.Results, r.Seconds,
			strings.ReplaceAll(failed, "|", "\\|"), r.Pool)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("writing fleet.md: %w", err)
	}
	return nil
}
