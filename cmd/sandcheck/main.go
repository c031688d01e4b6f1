// Command sandcheck proves whether a sandbox for AI-agent code execution
// really contains hostile code: it starts sandboxes the way the platform
// does, runs probes inside them, observes from the host, grades the evidence
// with OPA policies and writes reports.
//
// Exit codes: 0 every release criterion holds; 1 at least one criterion fails
// (or could not be confirmed); 2 the harness could not do its job (bad input,
// no engine, internal error).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time (-X main.version=...).
var version = "dev"

// Exit codes, documented in the README.
const (
	exitPass    = 0
	exitFail    = 1
	exitHarness = 2
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func harness(err error) error { return &exitError{code: exitHarness, err: err} }

func main() {
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return
	}
	code := exitHarness
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if ee == nil || ee.err != nil {
		fmt.Fprintln(os.Stderr, "sandcheck:", err)
	}
	os.Exit(code)
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "sandcheck",
		Short:         "Prove whether an AI-agent sandbox really contains hostile code",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return harness(err) })
	root.AddCommand(runCmd(), probesCmd(), targetsCmd(), doctorCmd(), traceCmd(), traceExecCmd(), policyCmd(), canaryCmd(), cleanupCmd())
	root.AddCommand(diffCmd(), historyCmd(), compareCmd(), versionCmd())
	root.AddCommand(imageCmd(), registryCmd(), reportCmd(), runsCmd())
	setVocabulary(root)
	return root
}
