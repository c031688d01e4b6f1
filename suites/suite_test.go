package suites

import (
	"flag"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandcheck/sandcheck/engine"
)

var (
	flagTarget = flag.String("target", "../fixtures/targets/hardened.yaml", "target file to run the specs against")
	flagOut    = flag.String("out", "", "output folder (default: a temporary folder)")
)

// TestSuites runs the probe specs through `go test` or `ginkgo`:
//
//	ginkgo --label-filter='privilege && !slow' ./suites -- --target=fixtures/targets/weak.yaml
//
// It needs root and a Docker engine, like any sandcheck run.
func TestSuites(t *testing.T) {
	if testing.Short() {
		t.Skip("the probe specs start real sandboxes; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("the probe specs need root and a Docker engine")
	}
	out := *flagOut
	if out == "" {
		out = t.TempDir()
	}
	Declare(engine.Config{TargetPath: *flagTarget, OutDir: out, ProbeBinary: engine.DefaultProbeBinary(),
		StartedBy: engine.StartedBy(), Version: "test"}, nil)
	RegisterFailHandler(Fail)
	RunSpecs(t, "sandcheck probes")
}
