package process

import (
	"os"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

func TestConformance(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runner makes cgroups and network namespaces: needs root")
	}
	copyDir, err := os.MkdirTemp("", "sandcheck-process-copy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(copyDir) })
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r, err := New(Config{Network: "none", Limits: targets.Limits{PidsLimit: 64, Memory: "128Mi", CPUs: 1}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return r
		},
		CopyPath: copyDir + "/conformance-copy",
	})
}
