package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/reports"
	"github.com/sandcheck/sandcheck/runners"
	_ "github.com/sandcheck/sandcheck/runners/all"
	"github.com/sandcheck/sandcheck/runners/docker"
	"github.com/sandcheck/sandcheck/targets"
)

func runCmd() *cobra.Command {
	var (
		cfg      engine.Config
		verbose  bool
		quiet    bool
		logLevel string
		timeout  time.Duration
		failWarn bool
		trace    bool
		baseline string
		failRegr bool
		outs     = newOutputs(reports.Formats(), engine.DefaultFormats...)
	)
	c := &cobra.Command{
		Use:   "run --target FILE --out-dir DIR",
		Short: "Run the probes against a target and grade the evidence",
		Long: `Run starts sandboxes as the target file says, runs the selected probes
inside them, joins what the host observed, grades the record with the release
policy and writes evidence.jsonl, run.json, junit.xml, summary.md, results.sarif
and report.html to --out.

--policy adds user policies (a folder of Rego and data, or an OPA bundle) to
the release criteria; --waivers applies a waiver file. Both are checked before
anything starts.

Exit codes: 0 every release criterion holds; 1 a criterion fails or could not
be confirmed (or, with --fail-on-warn, the verdict carries warnings); 2 the
harness could not do its job, or a policy or waiver file is malformed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.TargetPath == "" {
				return harness(errors.New("--target is required"))
			}
			tg, err := targets.Load(cfg.TargetPath)
			if err != nil {
				return harness(err)
			}
			var base *evidence.Record
			if baseline != "" {
				// Read before anything starts: a baseline that cannot be
				// read is the harness's fault, found at once.
				if base, err = reports.LoadRecord(baseline); err != nil {
					return harness(fmt.Errorf("--baseline: %w", err))
				}
			} else if failRegr {
				return harness(errors.New("--fail-on-regression needs --baseline"))
			}
			g, err := cfg.NewGrader()
			if err != nil {
				return harness(err)
			}
			cfg.Grader = g // compiled once: the run grades with it
			cfg.Formats = outs.formats()
			if err := engine.CheckFormats(cfg.Formats); err != nil {
				return harness(err)
			}
			if cfg.Parallel < 1 {
				return harness(fmt.Errorf("--parallel %d: must be at least 1", cfg.Parallel))
			}
			if os.Geteuid() != 0 {
				return harness(errors.New("sandcheck run needs root (it creates networks, plants host canaries and inspects runtimes); run it with sudo"))
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return harness(fmt.Errorf("--log-level: %w", err))
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			cfg.StartedBy, cfg.Version = engine.StartedBy(), version
			cfg.NoTrace = !trace
			if cfg.ProbeBinary == "" {
				cfg.ProbeBinary = engine.DefaultProbeBinary()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			// Supply chain: verify the image before anything starts
			// (imagegate.go); what was verified is bound into the record.
			if cfg.Provenance, err = imageGate(ctx, cmd.OutOrStdout(), cfg, tg); err != nil {
				return err
			}
			if err := preflight(ctx, cmd.ErrOrStderr(), cfg, tg); err != nil {
				return err
			}
			// From here on the run makes things on the host: its reaper
			// removes them if this process dies before it does (reaper.go).
			if rp, err := startReaper(cfg.OutDir, timeout); err != nil {
				cfg.Logger.Warn("no reaper: if this run is killed, what it made stays until `sandcheck cleanup` or the next run", "err", err)
			} else {
				defer rp.end()
				if rp.cgroupErr != nil {
					cfg.Logger.Warn("the reaper shares a cgroup with this run: a kill of that cgroup (systemd, a CI runner) takes the reaper too, and what the run made stays until `sandcheck cleanup` or the next run (its sandboxes end within their lease)", "err", rp.cgroupErr)
				} else if len(rp.cgroups) > 0 {
					cfg.Logger.Debug("the reaper left the run's cgroups", "cgroups", rp.cgroups)
				}
			}
			if pools := tg.PoolNames(); len(pools) > 1 {
				if named(outs) {
					return harness(errors.New("-o FORMAT=FILE names one file, and a fleet writes one report per pool (into --out-dir/POOL)"))
				}
				// A fleet: one run per node pool, all at once.
				return runFleet(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, pools, failWarn, quiet)
			}
			con := newConsole(cmd.OutOrStdout(), verbose, quiet)
			cfg.Progress = con.progress()
			o, err := engine.Run(ctx, cfg)
			if err != nil {
				// The evidence is incomplete (a write failed) or the run
				// never started: never a verdict on the target.
				if o != nil && o.Record != nil && o.Record.Verdict != nil {
					printVerdict(cmd.OutOrStdout(), o.Record, quiet)
				}
				if o != nil {
					printHarnessErrors(cmd.ErrOrStderr(), o.HarnessErrors)
				}
				return harness(err)
			}
			if err := writeNamedOutputs(o, outs); err != nil {
				return harness(err)
			}
			verdict := concludeWith(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, failWarn, con)
			if base == nil || o.Record == nil || o.Record.Verdict == nil {
				return verdict
			}
			regressed, err := compareBaseline(cmd.OutOrStdout(), cfg.OutDir, base, o.Record)
			if err != nil {
				return harness(err)
			}
			if verdict == nil && failRegr && regressed {
				return &exitError{code: exitFail, err: errors.New("regression against the baseline (--fail-on-regression): see diff.md")}
			}
			return verdict
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.TargetPath, "target", "", "target file (see fixtures/targets)")
	f.StringVar(&cfg.OutDir, "out-dir", "out", "folder for evidence and reports")
	deprecatedAlias(f, "out", "out-dir")
	f.StringVar(&cfg.Probes, "probes", "", "glob over probe IDs, or a comma-separated list of globs, e.g. 'syscalls.*,host.engine-socket'")
	f.StringVar(&cfg.LabelFilter, "label-filter", "", "Ginkgo label expression, e.g. 'privilege && !slow'")
	f.StringVar(&cfg.ProbeBinary, "probe-binary", "", "static sandcheck-probe to deliver (default: next to sandcheck)")
	addOutputFlag(f, outs, "the reports to write into --out-dir, repeatable; FORMAT=FILE also writes that one to FILE")
	deprecatedAlias(f, "format", "output")
	f.IntVar(&cfg.Parallel, "parallel", runtime.NumCPU(), "sandboxes of their own run at once (1: every probe one after another)")
	f.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "bound on each sandbox start")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "bound on the whole run")
	f.BoolVarP(&verbose, "verbose", "v", false, "print every probe's result as it finishes, also in CI logs (a terminal always shows them)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the verdict and failures")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	f.BoolVar(&trace, "trace", true, "watch the sandboxes with the eBPF tracer where available (the record says why when it is not)")
	f.StringVar(&baseline, "baseline", "", "an earlier run (run.json or its folder) to compare with: material changes, new failures, fixes (diff.md)")
	f.BoolVar(&failRegr, "fail-on-regression", false, "with --baseline: exit 1 when the run fails something the baseline did not, even if its verdict passes")
	addPolicyFlags(f, &cfg, &failWarn)
	return c
}

// compareBaseline writes diff.md (what changed since the baseline run: the
// material changes the threat model says to rerun after, new failures,
// fixes, changed evidence) beside the run's reports, prints a line of it,
// and reports whether the run regressed.
func compareBaseline(w io.Writer, outDir string, base, cur *evidence.Record) (bool, error) {
	d := reports.Diff(base, cur)
	var buf bytes.Buffer
	if err := reports.WriteDiffMarkdown(&buf, d); err != nil {
		return false, fmt.Errorf("writing the baseline diff: %w", err)
	}
	path := filepath.Join(outDir, "diff.md")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return false, fmt.Errorf("writing the baseline diff: %w", err)
	}
	fmt.Fprintf(w, "baseline %s: %d material changes, %d new failures, %d fixed (%s)\n",
		d.Old.RunID, len(d.Material), len(d.NewFailures), len(d.Fixed), path)
	return d.Regressed(), nil
}

// conclude prints the verdict and turns it into the exit code: 2 when the
// harness could not complete the run, 1 when the verdict fails (or carries
// warnings and failOnWarn is set), 0 otherwise. `sandcheck policy eval`
// concludes the same way.
func conclude(w, errw io.Writer, o *engine.Outcome, failOnWarn bool) error {
	return concludeWith(w, errw, o, failOnWarn, newConsole(w, false, false))
}

// concludeWith is conclude for console c: quiet prints only the criteria
// that did not pass and the verdict; otherwise the graded results that are
// not what the profile expects (all of them when verbose) come first.
func concludeWith(w, errw io.Writer, o *engine.Outcome, failOnWarn bool, c *console) error {
	quiet := c.q
	rec := o.Record
	if rec != nil && rec.Verdict != nil {
		if !quiet {
			printGraded(w, rec, c.verbose, c.color)
		}
		printVerdict(w, rec, quiet)
		for _, p := range o.Reports {
			if !quiet {
				fmt.Fprintf(w, "  wrote %s\n", p)
			}
		}
	}
	if len(o.HarnessErrors) > 0 {
		printHarnessErrors(errw, o.HarnessErrors)
		return &exitError{code: exitHarness, err: fmt.Errorf("the harness could not complete the run (%d errors); evidence gathered so far is in the output folder", len(o.HarnessErrors))}
	}
	if rec == nil || rec.Verdict == nil {
		return harness(errors.New("the run produced no verdict"))
	}
	switch {
	case !rec.Verdict.Pass:
		fmt.Fprintln(w, "verdict: FAIL")
		return &exitError{code: exitFail, err: nil}
	case failOnWarn && len(rec.Verdict.Warnings) > 0:
		fmt.Fprintf(w, "verdict: FAIL (%d warnings, --fail-on-warn)\n", len(rec.Verdict.Warnings))
		return &exitError{code: exitFail, err: nil}
	}
	fmt.Fprintln(w, "verdict: PASS")
	return nil
}

// harnessReason is a criterion's reason for a probe the harness could not
// run; the harness error itself is printed once on stderr.
var harnessReason = regexp.MustCompile(`^probe \S+ was inconclusive: harness: `)

// printVerdict shows each criterion, the reasons of those that did not
// pass, the waivers and the warnings.
func printVerdict(w io.Writer, rec *evidence.Record, quiet bool) {
	v := rec.Verdict
	if !quiet {
		fmt.Fprintf(w, "\nsandcheck run %s: target %s (%s, %s)\n", reports.Line(rec.RunID), reports.Line(rec.Target.Name), reports.Line(rec.Runner), reports.Line(rec.Runtime))
	}
	for _, c := range v.Criteria {
		// Quiet still shows a waived criterion: an accepted failure is
		// never hidden.
		if quiet && c.Status != evidence.StatusFail && c.Status != evidence.StatusUnconfirmed && c.Status != evidence.StatusWaived {
			continue
		}
		fmt.Fprintf(w, "  %-12s %s\n", reports.Line(c.Status), reports.Line(c.ID))
		if c.Status == evidence.StatusFail || c.Status == evidence.StatusUnconfirmed || c.Status == evidence.StatusWaived {
			harness := 0
			for _, r := range c.Reasons {
				if harnessReason.MatchString(r) {
					// Said once, with the harness errors (stderr).
					harness++
					continue
				}
				fmt.Fprintf(w, "               - %s\n", reports.Line(r))
			}
			if harness > 0 {
				fmt.Fprintf(w, "               - %d probes could not run: see the harness errors\n", harness)
			}
		}
	}
	if quiet {
		return
	}
	fmt.Fprintf(w, "  %d results in %.1fs (sandbox starts %.1fs, probes %.1fs)\n", len(rec.Results),
		rec.Timing.TotalSeconds, rec.Timing.SandboxStartSeconds, rec.Timing.ProbeSeconds)
	for _, u := range v.Waivers {
		fmt.Fprintf(w, "  waiver %s applied (owner %s, expires %s, %d findings): %s\n", reports.Line(u.ID), reports.Line(u.Owner), reports.Line(u.Expires), len(u.Waived), reports.Line(u.Reason))
	}
	for _, u := range v.ExpiredWaivers {
		fmt.Fprintf(w, "  waiver %s expired on %s (owner %s): it no longer applies\n", reports.Line(u.ID), reports.Line(u.Expires), reports.Line(u.Owner))
	}
	for _, m := range v.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", reports.Line(m))
	}
}

// preflight makes, before a docker target's run starts, every check
// `targets validate` makes of it, and sweeps away what earlier runs that
// were killed left on the host (their sandboxes, networks, rules and run
// folders, found by the harness's own labels and names; live runs' things
// are kept). Another runner's run does no Docker work here (`sandcheck
// cleanup` sweeps for any); every run sweeps what the runners' own sweeps
// find (runners.Sweep). A sweep that cannot reach the engine is no reason
// to stop a run that may not need it.
func preflight(ctx context.Context, stderr io.Writer, cfg engine.Config, tg *targets.Target) error {
	// Every runner's own leftovers (runners.Sweep: the host-process
	// sandboxes of dead runs), whatever this run's runner.
	if removed, _, err := runners.Sweep(ctx, ""); err != nil {
		cfg.Logger.Warn("sweeping the sandboxes earlier runs left", "err", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(stderr, "sandcheck: removed %d things earlier killed runs' sandboxes left (sandcheck cleanup lists them)\n", len(removed))
	}
	if tg.Runner != "docker" {
		return nil
	}
	if err := docker.Ping(ctx); err != nil {
		// No engine: the run itself finds that and records it in its
		// evidence (exit 2), so nothing is checked or swept here.
		return nil
	}
	if err := docker.Preflight(ctx, tg, cfg.ProbeBinary); err != nil {
		return harness(err)
	}
	removed, _, err := docker.Sweep(ctx, docker.SweepOptions{OnLockWait: func(holder string) {
		fmt.Fprintf(stderr, "sandcheck: waiting up to 5s for the harness lock, held by %s, to sweep what earlier runs left (a live run's network is left alone)\n", holder)
	}})
	if err != nil {
		cfg.Logger.Warn("sweeping what earlier runs left", "err", err)
	}
	if len(removed) > 0 {
		fmt.Fprintf(stderr, "sandcheck: removed %d things earlier killed runs left (sandcheck cleanup lists them)\n", len(removed))
	}
	return nil
}
