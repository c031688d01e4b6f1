//go:build cluster

package kubernetes

import (
	"context"
	"os"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

// TestKubernetesConformance runs the runner conformance suite through the
// kubernetes runner on the real cluster (`make test-cluster` starts it and
// sets SANDCHECK_KUBECONFIG), with the hardened pod template, in each pool
// of the sandcheck cluster: runc and gVisor RuntimeClasses.
func TestKubernetesConformance(t *testing.T) {
	kc := os.Getenv("SANDCHECK_KUBECONFIG")
	if kc == "" {
		t.Fatal("SANDCHECK_KUBECONFIG is not set: run the cluster tests through `make test-cluster`")
	}
	noCopy := "the kubernetes runner copies nothing into a pod: the probe arrives through the sidecar's emptyDir"
	for _, pool := range []struct {
		name, runtimeClass, hidden string
	}{
		{"runc", "runc", ""},
		{"gvisor", "gvisor", "gVisor runs the pod's processes inside its own kernel: no host process carries their environment"},
	} {
		t.Run(pool.name, func(t *testing.T) {
			runnertest.Run(t, runnertest.Config{
				New: func(t *testing.T) runners.Runner {
					tg := &targets.Target{
						Path:  fixtures + "conformance.yaml", // only its folder is used
						Name:  "conformance-" + pool.name,
						Image: "sandcheck/runner:dev",
						Kubernetes: &targets.Kubernetes{
							Kubeconfig:  kc,
							PodTemplate: "pod-hardened.yaml",
							Namespace:   "namespace-hardened.yaml",
							Pools:       []targets.Pool{{Name: pool.name, RuntimeClass: pool.runtimeClass}},
						},
					}
					r, err := New(context.Background(), tg, nil)
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return r
				},
				NoCopyIn:        noCopy,
				HiddenProcesses: pool.hidden,
			})
		})
	}
}
