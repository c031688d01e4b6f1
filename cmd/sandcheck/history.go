package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
)

func historyCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "history DIR...",
		Short: "Render a trend page (history.html, history.md) over stored runs",
		Long: `History reads every run.json under the folders (or the files) named, oldest
first, compares each with the previous run of its target and writes
history.md and history.html into --out-dir (default: the first folder named):
verdicts, failed and unconfirmed results, new failures, fixes and the material
changes between runs. Exit 2 when no record can be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := reports.LoadRecords(args)
			if err != nil {
				return harness(err)
			}
			dir := out
			if dir == "" {
				dir = args[0]
				if st, err := os.Stat(dir); err == nil && !st.IsDir() {
					dir = filepath.Dir(dir)
				}
			}
			rows := reports.History(runs)
			var md, page bytes.Buffer
			if err := reports.WriteHistoryMarkdown(&md, rows); err != nil {
				return harness(err)
			}
			if err := reports.WriteHistoryHTML(&page, rows); err != nil {
				return harness(err)
			}
			if err := writeFiles(dir, map[string][]byte{"history.md": md.Bytes(), "history.html": page.Bytes()}); err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d run(s); wrote %s and %s\n", len(rows),
				filepath.Join(dir, "history.md"), filepath.Join(dir, "history.html"))
			return nil
		},
	}
	c.Flags().StringVar(&out, "out-dir", "", "folder to write history.md and history.html into")
	deprecatedAlias(c.Flags(), "out", "out-dir")
	return c
}

// writeFiles writes each named file into dir, creating dir.
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing into %s: %w", dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
