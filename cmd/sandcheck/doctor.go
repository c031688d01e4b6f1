package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/internal/doctor"
)

func doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run sandcheck, with a fix for each gap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctor.Run(cmd.Context())
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
}
