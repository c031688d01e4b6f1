package wrapper

import (
	"context"

	"github.com/sandcheck/sandcheck/runners/process"
)

// idPrefix is the prefix of the wrapper sandboxes' IDs (process.NewID).
const idPrefix = "scwr"

// Sweep is the wrapper runner's runners.SweepFunc: it removes the
// sandboxes of dead runs under StateRoot, with their cgroups, the
// processes still in them (the wrapper and what it started) and their
// probe mounts (process.SweepSandboxes).
func Sweep(_ context.Context, only string) (removed, kept []string, err error) {
	return process.SweepSandboxes(StateRoot, idPrefix, only)
}
