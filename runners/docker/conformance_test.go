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
			hidden := ""
			if runtime == "runsc" {
				hidden = "gVisor runs the sandbox's processes inside its own kernel, not as host processes"
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
			})
		})
	}
}
