package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/internal/doctor"
)

func doctorCmd() *cobra.Command {
	var asJSON bool
	var target, probeBinary string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run sandcheck, with a fix for each gap",
		Long: `Check that this machine can run sandcheck, with a fix for each gap.

With --target, the checks are those one target's run needs (a runc target
does not need runsc or bubblewrap), plus every check 'targets validate' and
'run' make on the file and the probe binary before anything starts: doctor
then fails exactly where the run would.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctor.Run(cmd.Context())
			if target != "" {
				if probeBinary == "" {
					probeBinary = engine.DefaultProbeBinary()
				}
				checks = forTarget(cmd, checks, target, probeBinary)
			}
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
	printFlag(c, &asJSON, "{ok, missing, checks: [{name, status, detail, fix}]}")
	c.Flags().StringVar(&target, "target", "", "check what this target file's run needs, and the file itself")
	c.Flags().StringVar(&probeBinary, "probe-binary", "", "with --target: the static sandcheck-probe the run would deliver (default: as run finds it)")
	return c
}

// forTarget narrows the machine's checks to one target's run and adds the
// target's own check, the one `targets validate` makes.
func forTarget(cmd *cobra.Command, checks []doctor.Check, file, probeBinary string) []doctor.Check {
	t, err := checkTarget(cmd.Context(), file, probeBinary)
	tc := doctor.Check{Name: "target", Status: doctor.OK}
	if err != nil {
		tc.Status, tc.Detail = doctor.Missing, err.Error()
		tc.Fix = "correct the target file ('sandcheck targets validate " + file + "' shows the same error)"
	} else {
		tc.Detail = fmt.Sprintf("%s: ok (%s, runner %s, profile %s; probe %s)", file, t.Name, t.Runner, t.Profile, probeBinary)
	}
	if t == nil {
		return append(checks, tc)
	}
	n := doctor.Needs{Runner: t.Runner}
	if t.Runner == "" || t.Runner == "docker" {
		n.Runner = "docker"
		if t.Docker != nil {
			n.Runtime = t.Docker.Runtime
		}
		n.Image = t.Image
	}
	return append(doctor.ForTarget(checks, t.Name, n), tc)
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
