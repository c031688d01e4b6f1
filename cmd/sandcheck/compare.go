package main

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
)

func compareCmd() *cobra.Command {
	var out, refs string
	c := &cobra.Command{
		Use:   "compare RUN...",
		Short: "Matrix of probes by sandbox kind over stored runs (Markdown and HTML)",
		Long: `Compare reads stored runs (run.json files, or folders searched for them) and
renders a matrix of probes by sandbox kind (process, bwrap, docker/runc,
docker/runsc, ...) with each kind's mean sandbox start time and host kernel
surface (the distinct host syscalls the tracer saw). The Markdown goes to
standard output; with --out-dir, compare.md and compare.html are written there,
each cell of compare.html linked to its run's report (report.html beside the
run's run.json). A cell whose outcome the host confirmed (canary, tracer,
runtime view, kernel, teardown) is marked; the others rest on the probe's word.
With --references DIR, an inconclusive cell stands only where the reference
file of its column's target (DIR/<target>.yaml, key inconclusive) says why;
any other is refused: nothing is written and the exit code is 2, naming the
column, its target and the probes. Exit 2 when a record cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := reports.LoadRecords(args)
			if err != nil {
				return harness(err)
			}
			c := reports.Compare(runs)
			if refs != "" {
				if err := c.ExplainInconclusive(refs); err != nil {
					return harness(fmt.Errorf("the matrix has unexplained inconclusive cells: %w", err))
				}
			}
			var md, page bytes.Buffer
			if err := reports.WriteCompareMarkdown(&md, c); err != nil {
				return harness(err)
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(md.Bytes())
				return err
			}
			if err := c.LinkReports(out); err != nil {
				return harness(err)
			}
			if err := reports.WriteCompareHTML(&page, c); err != nil {
				return harness(err)
			}
			if err := writeFiles(out, map[string][]byte{"compare.md": md.Bytes(), "compare.html": page.Bytes()}); err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d run(s), %d probes; wrote %s and %s\n", len(runs), len(c.Probes),
				filepath.Join(out, "compare.md"), filepath.Join(out, "compare.html"))
			return nil
		},
	}
	c.Flags().StringVar(&out, "out-dir", "", "folder to write compare.md and compare.html into")
	c.Flags().StringVar(&refs, "references", "", "folder of the reference result files (fixtures/references): refuse an inconclusive cell they do not explain")
	deprecatedAlias(c.Flags(), "out", "out-dir")
	return c
}
