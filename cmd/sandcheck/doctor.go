package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/internal/doctor"
)

func doctorCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run sandcheck, with a fix for each gap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctor.Run(cmd.Context())
			if asJSON {
				return doctorJSON(cmd, checks)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			missing := 0
			for _, c := range checks {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
				if c.Status != "ok" && c.Fix != "" {
					fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
				}
				if c.Status == "missing" {
					missing++
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if missing > 0 {
				return harness(fmt.Errorf("%d requirement(s) missing", missing))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON ({ok, missing, checks: [{name, status, detail, fix}]})")
	return c
}

// doctorJSON prints the checks as one JSON document; like the table, it
// exits 2 when a requirement is missing.
func doctorJSON(cmd *cobra.Command, checks []doctor.Check) error {
	missing := 0
	for _, c := range checks {
		if c.Status == "missing" {
			missing++
		}
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		OK      bool           `json:"ok"`
		Missing int            `json:"missing"`
		Checks  []doctor.Check `json:"checks"`
	}{missing == 0, missing, checks}); err != nil {
		return harness(fmt.Errorf("writing the checks: %w", err))
	}
	if missing > 0 {
		return &exitError{code: exitHarness}
	}
	return nil
}
