// Package all builds every runner backend into a program: importing it
// registers each with the runners factory. Programs that run targets (the
// CLI, the Ginkgo suite) import it; the engine itself names no backend.
package all

import (
	// Each backend registers itself in its init.
	_ "github.com/sandcheck/sandcheck/runners/bwrap"
	_ "github.com/sandcheck/sandcheck/runners/command"
	_ "github.com/sandcheck/sandcheck/runners/docker"
	_ "github.com/sandcheck/sandcheck/runners/gateway"
	_ "github.com/sandcheck/sandcheck/runners/opensandbox"
	_ "github.com/sandcheck/sandcheck/runners/process"
	_ "github.com/sandcheck/sandcheck/runners/wrapper"
)
