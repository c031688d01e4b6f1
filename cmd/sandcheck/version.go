package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/targets"
)

// versionInfo is what `sandcheck version --json` prints.
type versionInfo struct {
	Version       string `json:"version"`
	Module        string `json:"module,omitempty"`
	Go            string `json:"go"`
	Platform      string `json:"platform"`
	PolicyVersion string `json:"policy_version"`
	RunSchema     string `json:"run_schema"`
	TargetSchema  string `json:"target_schema"`
}

func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print sandcheck's version, its release policy's digest and the formats it reads and writes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
				PolicyVersion: policies.Version, RunSchema: evidence.Schema, TargetSchema: targets.Schema}
			if bi, ok := debug.ReadBuildInfo(); ok {
				v.Module = bi.Main.Path
				if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					v.Version = bi.Main.Version // go install module@version
				}
			}
			if !asJSON {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "sandcheck %s (%s, %s)\npolicy %s\nreads %s, %s\n",
					v.Version, v.Go, v.Platform, v.PolicyVersion, v.TargetSchema, v.RunSchema)
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
	}
	printFlag(c, &asJSON, "the version and build information")
	return c
}
