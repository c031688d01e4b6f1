package main

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
)

func compareCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "compare RUN...",
		Short: "Matrix of probes by sandbox kind over stored runs (Markdown and HTML)",
		Long: `Compare reads stored runs (run.json files, or folders searched for them) and
renders a matrix of probes by sandbox kind (process, bwrap, docker/runc,
docker/runsc, ...) with each kind's mean sandbox start time and host kernel
surface (the distinct host syscalls the tracer saw). The Markdown goes to
standard output; with --out-dir, compare.md and compare.html are written there.
Exit 2 when a record cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := reports.LoadRecords(args)
			if err != nil {
				return harness(err)
			}
			c := reports.Compare(runs)
			var md, page bytes.Buffer
			if err := reports.WriteCompareMarkdown(&md, c); err != nil {
				return harness(err)
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(md.Bytes())
				return err
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
	deprecatedAlias(c.Flags(), "out", "out-dir")
	return c
}
