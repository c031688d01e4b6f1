package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/reports"
)

// addPolicyFlags declares the grading flags run and policy eval share.
func addPolicyFlags(f *pflag.FlagSet, cfg *engine.Config, failOnWarn *bool) {
	f.StringArrayVar(&cfg.PolicyPaths, "policy", nil, "user policy: a folder of Rego and data files or an OPA bundle (.tar.gz); repeatable")
	f.StringVar(&cfg.Waivers, "waivers", "", "waiver file (YAML; see fixtures/waivers)")
	f.BoolVar(&cfg.AllowCriterionWaivers, "allow-criterion-waivers", false, "admit waivers of a whole criterion (each shows as a waived criterion with a warning in every report)")
	f.IntVar(&cfg.WaiverMaxDays, "waiver-max-days", int(policies.DefaultWaiverMaxAge.Hours()/24), "the furthest ahead, in days, a waiver may expire")
	f.BoolVar(failOnWarn, "fail-on-warn", false, "exit 1 when the verdict carries warnings")
}

func policyCmd() *cobra.Command {
	c := &cobra.Command{Use: "policy", Short: "Work with the release policy: re-grade stored runs, test user policies, print the input schema"}
	c.AddCommand(policyEvalCmd(), policyTestCmd(), policySchemaCmd())
	return c
}

func policyEvalCmd() *cobra.Command {
	var (
		cfg      engine.Config
		input    string
		failWarn bool
		outs     = newOutputs(reports.Formats(), engine.DefaultFormats...)
	)
	c := &cobra.Command{
		Use:   "eval --input run.json",
		Short: "Re-grade a stored run without starting anything",
		Long: `Eval grades a stored run record (run.json) with the release policy, any
--policy and --waivers, prints the verdict as run does and exits as run does:
0 pass, 1 a criterion fails or is unconfirmed (or warnings with --fail-on-warn),
2 the record, a policy or a waiver file is malformed. With --out-dir it writes
the reports for the new verdict (-o FORMAT=FILE writes one to a file). The record's own verdict is ignored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if input == "" {
				return harness(errors.New("--input is required"))
			}
			g, err := cfg.NewGrader()
			if err != nil {
				return harness(err)
			}
			rec, err := readRecord(input)
			if err != nil {
				return harness(err)
			}
			v, err := g.Grade(cmd.Context(), rec)
			if err != nil {
				return harness(err)
			}
			rec.Verdict = v
			// The record now names the policies that gave its verdict (the
			// verdict warns when they differ from the ones it was run with).
			g.Stamp(&rec.Tool)
			o := &engine.Outcome{Record: rec, HarnessErrors: rec.Errors}
			if cfg.OutDir != "" {
				if o.Reports, err = reports.WriteAll(cfg.OutDir, rec, outs.formats()); err != nil {
					return harness(fmt.Errorf("writing reports: %w", err))
				}
			}
			if err := writeNamedOutputs(o, outs); err != nil {
				return harness(err)
			}
			return conclude(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, failWarn)
		},
	}
	f := c.Flags()
	f.StringVar(&input, "input", "", "stored run record (run.json)")
	f.StringVar(&cfg.OutDir, "out-dir", "", "folder for the re-graded run.json and reports (default: write nothing)")
	deprecatedAlias(f, "out", "out-dir")
	addOutputFlag(f, outs, "the reports to write into --out-dir, repeatable; FORMAT=FILE also writes that one to FILE")
	deprecatedAlias(f, "format", "output")
	addPolicyFlags(f, &cfg, &failWarn)
	return c
}

func readRecord(path string) (*evidence.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading run record: %w", err)
	}
	defer f.Close()
	rec, err := policies.DecodeRecord(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

func policyTestCmd() *cobra.Command {
	var verbose bool
	c := &cobra.Command{
		Use:   "test DIR...",
		Short: "Run a team's Rego tests (*_test.rego) against the release policy plus their policies",
		Long: `Test loads the policies in each DIR (folders or OPA bundles) on top of the
embedded release policy, as run --policy does, compiles them strictly and runs
every test rule in their *_test.rego files. Exit codes: 0 all pass, 1 a test
fails, 2 a policy does not load or compile.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := policies.Test(cmd.Context(), args...)
			if err != nil {
				return harness(err)
			}
			return reportTests(cmd.OutOrStdout(), res, verbose)
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	return c
}

func reportTests(w io.Writer, res []policies.TestResult, verbose bool) error {
	failed := 0
	for _, r := range res {
		switch {
		case r.Error != nil:
			failed++
			fmt.Fprintf(w, "ERROR %s (%s): %v\n", r.Name, r.Location, r.Error)
		case r.Fail:
			failed++
			fmt.Fprintf(w, "FAIL  %s (%s)\n", r.Name, r.Location)
		case verbose:
			fmt.Fprintf(w, "PASS  %s (%s) %s\n", r.Name, r.Location, r.Duration.Round(time.Microsecond))
		}
	}
	fmt.Fprintf(w, "%d/%d tests pass\n", len(res)-failed, len(res))
	if failed > 0 {
		return &exitError{code: exitFail}
	}
	return nil
}

func policySchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the policy input (the run record)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(policies.RunSchema)
			return err
		},
	}
}
