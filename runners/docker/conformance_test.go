package docker

import (
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

// TestConformance runs the runner conformance suite against docker with runc
// and with runsc, on the hardened settings with a writable root (the
// engine's copy API cannot write into a read-only one).
func TestConformance(t *testing.T) {
	requireEngine(t)
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			requireRuntime(t, runtime)
			cfg := hardened(runtime)
			cfg.ReadOnlyRootfs = false
			cfg.Tmpfs = []targets.Tmpfs{{Path: "/scratch", Size: "32Mi"}}
			hidden, noCopy := "", ""
			if runtime == "runsc" {
				hidden = "gVisor runs the sandbox's processes inside its own kernel, not as host processes"
				// Observed here: the copy succeeds, the file is not there
				// inside (gVisor serves the root file system from its own
				// overlay, which does not see the engine's write).
				noCopy = "docker cp into a runsc container writes where gVisor does not look"
			}
			runnertest.Run(t, runnertest.Config{
				New: func(t *testing.T) runners.Runner {
					r, err := New(cfg, testImage)
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return r
				},
				CopyPath:        "/tmp/conformance-copy",
				HiddenProcesses: hidden,
				NoCopyIn:        noCopy,
			})
		})
	}
}
