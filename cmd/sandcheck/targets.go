package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/targets"
)

func targetsCmd() *cobra.Command {
	c := &cobra.Command{Use: "targets", Short: "Work with target files"}
	var asJSON bool
	v := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check target files; errors name file, line and field",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return validateJSON(cmd, args)
			}
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
	}
	v.Flags().BoolVar(&asJSON, "json", false, "print one JSON document: [{file, ok, name, runner, profile, digest, error}]")
	c.AddCommand(v)
	return c
}

// targetCheck is one file's result in `targets validate --json`.
type targetCheck struct {
	File    string `json:"file"`
	OK      bool   `json:"ok"`
	Name    string `json:"name,omitempty"`
	Runner  string `json:"runner,omitempty"`
	Profile string `json:"profile,omitempty"`
	Digest  string `json:"digest,omitempty"`
	Error   string `json:"error,omitempty"`
}

func validateJSON(cmd *cobra.Command, files []string) error {
	var out []targetCheck
	bad := 0
	for _, f := range files {
		t, err := targets.Load(f)
		if err != nil {
			out = append(out, targetCheck{File: f, Error: err.Error()})
			bad++
			continue
		}
		out = append(out, targetCheck{File: f, OK: true, Name: t.Name, Runner: t.Runner, Profile: t.Profile, Digest: t.Digest})
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return harness(fmt.Errorf("writing the results: %w", err))
	}
	if bad > 0 {
		return &exitError{code: exitHarness}
	}
	return nil
}
