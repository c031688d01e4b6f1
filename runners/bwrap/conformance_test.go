package bwrap

import (
	"os"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

// requireBwrap skips unless the test runs as root with bwrap installed.
func requireBwrap(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the bwrap runner makes cgroups and drops to its host user: needs root")
	}
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("needs bubblewrap: %v", err)
	}
}

// loadTarget reads a reference target's bwrap section.
func loadTarget(t *testing.T, name string) (Config, string) {
	t.Helper()
	tg, err := targets.Load("../../fixtures/targets/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return *tg.Section.(*Config), "../../fixtures/targets"
}

func TestConformance(t *testing.T) {
	requireBwrap(t)
	hardened, dir := loadTarget(t, "bwrap-hardened.yaml")
	weak, _ := loadTarget(t, "bwrap-weak.yaml")
	weak.Network = "none"
	weak.Unshare = []string{"net"}
	weak.Binds = nil // the run's folder is the engine's
	for name, cfg := range map[string]Config{"hardened": hardened, "weak": weak} {
		t.Run(name, func(t *testing.T) {
			runnertest.Run(t, runnertest.Config{
				New: func(t *testing.T) runners.Runner {
					r, err := New(cfg, dir)
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return r
				},
				CopyPath: "/tmp/conformance-copy",
			})
		})
	}
}
