package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/targets"
)

func targetsCmd() *cobra.Command {
	c := &cobra.Command{Use: "targets", Short: "Work with target files"}
	c.AddCommand(&cobra.Command{
		Use:   "validate FILE...",
		Short: "Check target files; errors name file, line and field",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, f := range args {
				t, err := targets.Load(f)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s, runner %s, profile %s)\n", f, t.Name, t.Runner, t.Profile)
			}
			if bad > 0 {
				return &exitError{code: exitHarness, err: fmt.Errorf("%d of %d target files are invalid", bad, len(args))}
			}
			return nil
		},
	})
	return c
}
