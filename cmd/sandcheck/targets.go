package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/runners/docker"
	"github.com/sandcheck/sandcheck/suites"
	"github.com/sandcheck/sandcheck/targets"
)

func targetsCmd() *cobra.Command {
	c := &cobra.Command{Use: "targets", Short: "Work with target files"}
	var probeBinary string
	v := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check target files as run would; errors name file, line and field",
		Long: `Validate makes every check sandcheck run makes before it starts anything:
the file itself (schema, fields, one document, bounded size and nesting), the
mount sources, seccomp profile and devices it names, the Docker settings, the
image (present locally) and a named network on the engine, and the probe
binary (a static executable). Exit 2 when any file fails.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if probeBinary == "" {
				probeBinary = suites.DefaultProbeBinary()
			}
			bad := 0
			for _, f := range args {
				if !validateTarget(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, probeBinary) {
					bad++
				}
			}
			if bad > 0 {
				return &exitError{code: exitHarness, err: fmt.Errorf("%d of %d target files are invalid", bad, len(args))}
			}
			return nil
		},
	}
	v.Flags().StringVar(&probeBinary, "probe-binary", "", "static sandcheck-probe a run would deliver (default: next to sandcheck)")
	c.AddCommand(v)
	return c
}

// validateTarget loads one file and preflights it, printing the outcome.
func validateTarget(ctx context.Context, out, errw io.Writer, f, probeBinary string) bool {
	t, err := targets.Load(f)
	if err == nil {
		err = docker.Preflight(ctx, t, probeBinary)
	}
	if err != nil {
		fmt.Fprintln(errw, err)
		return false
	}
	fmt.Fprintf(out, "%s: ok (%s, runner %s, profile %s)\n", f, t.Name, t.Runner, t.Profile)
	return true
}
