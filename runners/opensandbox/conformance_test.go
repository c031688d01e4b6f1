package opensandbox

import (
	"testing"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
)

// TestConformance runs the runner conformance suite against the fixture
// lifecycle server with the real execd, with an API key.
func TestConformance(t *testing.T) {
	_, url := startServer(t, fixture.Config{APIKey: "conformance-key"})
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r, err := New(testCfg(url), testImage, "conformance-key", nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return r
		},
		CopyPath: "/tmp/conformance-copy",
		OwnEntrypoint: "the platform starts each sandbox with the target's entrypoint and execd beside it; " +
			"the probe binary is uploaded through execd only once the sandbox runs",
	})
}
