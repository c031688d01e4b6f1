package opensandbox

import (
	"testing"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
)

// TestConformance runs the runner conformance suite against the fixture
// lifecycle server with the real execd, with an API key, in each of
// upstream's endpoint forms: bare, as its default host network mode names
// execd (server networking.py 218), and {host}:{port}/proxy/44772 through
// execd's own proxy, as its bridge mode does (networking.py 269). Each
// runner's traffic is recorded and judged against upstream's OpenAPI
// documents when its test ends.
func TestConformance(t *testing.T) {
	for _, form := range []string{"bare", "proxy"} {
		t.Run(form, func(t *testing.T) { conformance(t, form) })
	}
}

func conformance(t *testing.T, form string) {
	_, url := startServer(t, fixture.Config{APIKey: "conformance-key", EndpointForm: form})
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r, err := New(testCfg(url), testImage, "conformance-key", nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			// Everything the suite makes the runner send and read is held
			// to upstream's documents too (contract_test.go).
			rec := record(t, r)
			t.Cleanup(func() { judge(t, url, rec, nil) })
			return r
		},
		CopyPath: "/tmp/conformance-copy",
		OwnEntrypoint: "the platform starts each sandbox with the target's entrypoint and execd beside it; " +
			"the probe binary is uploaded through execd only once the sandbox runs",
	})
}
