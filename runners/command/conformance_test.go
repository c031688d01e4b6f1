package command

import (
	"os"
	"os/exec"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

// dockerCLI is the docker CLI as "the platform": no network, no route out.
func dockerCLI() targets.Command {
	return targets.Command{
		Network: "none",
		Create: []string{"docker", "run", "--detach", "--name", "${NAME}", "--label", "sandcheck.runner=command-conformance",
			"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "64",
			"--mount", "type=volume,dst=/.sandcheck", "${ENV_ARGS}", "${IMAGE}", "sleep", "3600"},
		Exec:          []string{"docker", "exec", "${ID}", "${ARGV}"},
		CopyIn:        []string{"docker", "cp", "${SRC}", "${ID}:${DST}"},
		Destroy:       []string{"docker", "rm", "--force", "--volumes", "${ID}"},
		DestroyByName: []string{"docker", "rm", "--force", "--volumes", "${NAME}"},
		List:          []string{"docker", "ps", "--all", "--quiet", "--no-trunc", "--filter", "label=sandcheck.runner=command-conformance"},
		EnvArg:        []string{"--env", "${KEY}=${VALUE}"},
	}
}

func TestConformance(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and the docker CLI")
	}
	if err := exec.Command("docker", "image", "inspect", "sandcheck/runner:dev").Run(); err != nil {
		t.Skip("sandcheck/runner:dev is not built (make images)")
	}
	var made []*Runner
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r, err := New(dockerCLI(), "sandcheck/runner:dev", nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			made = append(made, r)
			return r
		},
	})
	// Every sandbox the suite made is gone, as the platform lists them.
	if len(made) > 0 {
		ids, err := made[0].List(t.Context())
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(ids) > 0 {
			t.Errorf("sandboxes left on the platform: %v", ids)
		}
	}
}
