package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/runners/docker"
	"github.com/sandcheck/sandcheck/targets"
)

func targetsCmd() *cobra.Command {
	c := &cobra.Command{Use: "targets", Short: "Work with target files"}
	var probeBinary string
	var asJSON bool
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
				probeBinary = engine.DefaultProbeBinary()
			}
			if asJSON {
				return validateJSON(cmd, args, probeBinary)
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
	printFlag(v, &asJSON, "one document: [{file, ok, name, runner, profile, digest, error}]")
	c.AddCommand(v)
	c.AddCommand(importCmd())
	return c
}

// checkTarget loads one file and makes every check run makes before it
// starts anything.
func checkTarget(ctx context.Context, f, probeBinary string) (*targets.Target, error) {
	t, err := targets.Load(f)
	if err != nil {
		return nil, err
	}
	if err := t.CheckPrograms(); err != nil {
		return t, err
	}
	if err := docker.Preflight(ctx, t, probeBinary); err != nil {
		return t, err
	}
	return t, nil
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

func validateJSON(cmd *cobra.Command, files []string, probeBinary string) error {
	var out []targetCheck
	bad := 0
	for _, f := range files {
		t, err := checkTarget(cmd.Context(), f, probeBinary)
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

// validateTarget checks one file, printing the outcome.
func validateTarget(ctx context.Context, out, errw io.Writer, f, probeBinary string) bool {
	t, err := checkTarget(ctx, f, probeBinary)
	if err != nil {
		fmt.Fprintln(errw, err)
		return false
	}
	fmt.Fprintf(out, "%s: ok (%s, runner %s, profile %s)\n", f, t.Name, t.Runner, t.Profile)
	return true
}

func importCmd() *cobra.Command {
	var id, out string
	var opts docker.ImportOptions
	var idLabels []string
	outs := newOutputs([]string{"yaml"}, "yaml")
	c := &cobra.Command{
		Use:   "import --container ID [-o yaml=FILE]",
		Short: "Write a target file from a container the platform started (docker inspect)",
		Long: `Import reads a container with docker inspect and writes its settings as a
target file: every setting it has, none dropped. What sandcheck cannot
reproduce (the container's command, port bindings, a restart policy, ...) is
named in the file's header comments and on stderr. A custom seccomp profile is
written next to the target file (-o yaml=FILE) as seccomp.json.

A container cannot say what the platform around it does; say it with
--profile (the profile the platform runs the sandbox under), --launch (exec:
one long-lived sandbox each task is exec'd into; task: a fresh sandbox per
task) and --identity-label (each label the platform sets to name the run or
task, as a template: acme.io/task=${SANDCHECK_TASK}). What is not given is
assumed (high-risk-code, exec, no identity label) and the file says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return harness(errors.New("--container is required"))
			}
			if e, err := outs.only(); err != nil {
				return harness(err)
			} else if e.File != "" {
				out = e.File
			}
			for _, l := range idLabels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return harness(fmt.Errorf("--identity-label %q: want KEY=VALUE", l))
				}
				if opts.IdentityLabels == nil {
					opts.IdentityLabels = map[string]string{}
				}
				opts.IdentityLabels[k] = v
			}
			im, err := docker.Import(cmd.Context(), id, opts)
			if err != nil {
				return harness(err)
			}
			b, err := renderImport(im)
			if err != nil {
				return harness(err)
			}
			for _, n := range im.Notes {
				fmt.Fprintf(cmd.ErrOrStderr(), "sandcheck: import: %s\n", n)
			}
			if out == "" {
				if im.Seccomp != "" {
					return harness(errors.New("the container has a custom seccomp profile: use -o yaml=FILE so it can be written beside the target"))
				}
				_, err := cmd.OutOrStdout().Write(b)
				return err
			}
			if im.Seccomp != "" {
				if err := os.WriteFile(filepath.Join(filepath.Dir(out), "seccomp.json"), []byte(im.Seccomp), 0o644); err != nil {
					return harness(fmt.Errorf("writing the seccomp profile: %w", err))
				}
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return harness(fmt.Errorf("writing the target: %w", err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d notes)\n", out, len(im.Notes))
			return nil
		},
	}
	c.Flags().StringVar(&id, "container", "", "container ID or name")
	c.Flags().StringVar(&opts.Profile, "profile", "", "the profile the platform runs the sandbox under (default: assume high-risk-code)")
	c.Flags().StringVar(&opts.Launch, "launch", "", "how the platform hands work to a sandbox: exec or task (default: assume exec)")
	c.Flags().StringArrayVar(&idLabels, "identity-label", nil, "a label the platform sets per sandbox, as KEY=TEMPLATE with ${SANDCHECK_RUN_ID}, ${SANDCHECK_TARGET}, ${SANDCHECK_TASK} (repeatable)")
	addOutputFlag(c.Flags(), outs, "the target file; yaml=FILE writes it to FILE instead of stdout")
	c.Flags().StringVar(&out, "out", "", "deprecated: use -o yaml=FILE")
	_ = c.Flags().MarkDeprecated("out", "use -o yaml=FILE (--out goes in the next release)")
	return c
}

// renderImport writes the imported target as YAML under a header naming
// what it could not carry.
func renderImport(im *docker.Imported) ([]byte, error) {
	body, err := yaml.Marshal(&im.Target)
	if err != nil {
		return nil, fmt.Errorf("encoding the target: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by sandcheck targets import from %s.\n", im.Target.Description)
	if len(im.Notes) > 0 {
		b.WriteString("# Settings sandcheck cannot carry or reproduce as they are:\n")
		for _, n := range im.Notes {
			fmt.Fprintf(&b, "#   - %s\n", strings.ReplaceAll(n, "\n", " "))
		}
	}
	b.Write(body)
	return b.Bytes(), nil
}
