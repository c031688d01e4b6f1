package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
)

func diffCmd() *cobra.Command {
	var (
		failOnRegression bool
		outs             = newOutputs([]string{"markdown", "json"}, "markdown")
	)
	c := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Name what changed between two stored runs: material changes, new failures, fixes, changed evidence",
		Long: `Diff compares two stored runs (run.json files, or folders holding one) for a
scheduled regression job: the material changes the threat model says to rerun
after (runner, runtime and its version, host kernel, image digest, network and
egress profile, policy version, target file), then results that newly fail, were
fixed or whose host evidence changed, and criteria that changed status.
Exit codes: 0 (or 1 with --fail-on-regression when the new run fails something
the old one did not), 2 when a record cannot be read.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := outs.only()
			if err != nil {
				return harness(err)
			}
			old, err := reports.LoadRecord(args[0])
			if err != nil {
				return harness(err)
			}
			cur, err := reports.LoadRecord(args[1])
			if err != nil {
				return harness(err)
			}
			d := reports.Diff(old, cur)
			out, closeOut, err := printTo(cmd.OutOrStdout(), e)
			if err != nil {
				return harness(err)
			}
			if e.Format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(diffDocument(d))
			} else {
				err = reports.WriteDiffMarkdown(out, d)
			}
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if err != nil {
				return harness(fmt.Errorf("writing the diff: %w", err))
			}
			if failOnRegression && d.Regressed() {
				return &exitError{code: exitFail, err: fmt.Errorf("regression: %d new failure(s) since run %s", len(d.NewFailures), d.Old.RunID)}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&failOnRegression, "fail-on-regression", false, "exit 1 when the new run fails something the old one did not")
	addOutputFlag(c.Flags(), outs, "what to print (=FILE writes it to a file)")
	deprecatedAlias(c.Flags(), "format", "output")
	return c
}

// diffRun is one side of a diff in its JSON form.
type diffRun struct {
	RunID   string `json:"run_id"`
	Target  string `json:"target"`
	Started string `json:"started"`
	Verdict string `json:"verdict"`
}

// diffJSON is `diff -o json` (policies/schema/diff.schema.json): every
// list present, empty rather than null.
type diffJSON struct {
	Schema    string  `json:"schema"`
	Regressed bool    `json:"regressed"`
	Old       diffRun `json:"old"`
	New       diffRun `json:"new"`
	reports.RunDiff
}

func diffDocument(d reports.RunDiff) diffJSON {
	empty := func(c []reports.ResultChange) []reports.ResultChange {
		if c == nil {
			return []reports.ResultChange{}
		}
		return c
	}
	if d.Material == nil {
		d.Material = []reports.Change{}
	}
	if d.Criteria == nil {
		d.Criteria = []reports.Change{}
	}
	d.NewFailures, d.Fixed, d.ChangedEvidence, d.OtherChanges = empty(d.NewFailures), empty(d.Fixed), empty(d.ChangedEvidence), empty(d.OtherChanges)
	ref := func(r reports.RunRef) diffRun { return diffRun{r.RunID, r.Target, r.Started, r.Verdict} }
	return diffJSON{Schema: "sandcheck.dev/diff/v1", Regressed: d.Regressed(), Old: ref(d.Old), New: ref(d.New), RunDiff: d}
}
