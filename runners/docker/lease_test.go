package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// TestHolderFollowsTheRunsLease (issue 40 item 5): a sandbox's holder, the
// real probe binary's, lives as long as the harness renews its lease, many
// lease lifetimes past it, and with no deadline label a sweep would act on;
// once the renewal stops, as when the run's process dies (even with its
// reaper), it exits on its own within about a lease lifetime. Before, it
// held for 2 h whatever became of the run.
func TestHolderFollowsTheRunsLease(t *testing.T) {
	requireEngine(t)
	const ttl = 3 * time.Second
	probes := t.TempDir()
	if err := os.Chmod(probes, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(probes, runners.ProbeBinary), "../../cmd/sandcheck-probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	r, err := New(hardened("runc"), testImage, WithLease(ttl))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := testSpec(t, probes)
	s, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	sb := s.(*Sandbox)
	defer sb.Close(context.Background())
	cli := engineClient(t)
	state := func() (running bool, code int) {
		res, err := cli.ContainerInspect(context.Background(), sb.id, client.ContainerInspectOptions{})
		if err != nil || res.Container.State == nil {
			t.Fatalf("inspecting the sandbox: %v", err)
		}
		if _, ok := res.Container.Config.Labels[LabelDeadline]; ok {
			t.Errorf("the sandbox has a deadline label %s: a sweep would remove it while its run lives", res.Container.Config.Labels[LabelDeadline])
		}
		return res.Container.State.Running, res.Container.State.ExitCode
	}
	time.Sleep(5 * ttl)
	if running, code := state(); !running {
		t.Fatalf("the holder ended (exit %d) within %s while its lease was renewed (lease %s)", code, 5*ttl, ttl)
	}
	sb.release() // what the run's death does to the lease
	stopped := time.Now()
	for {
		running, code := state()
		if !running {
			took := time.Since(stopped)
			if code != 0 || took < ttl/2 {
				t.Errorf("the holder ended %s after its lease stopped (lease %s) with exit %d", took, ttl, code)
			}
			t.Logf("lease renewed: the holder held %s (5 lease lifetimes); renewal stopped: it exited %s later (lease %s)", 5*ttl, took.Round(100*time.Millisecond), ttl)
			return
		}
		if time.Since(stopped) > 5*ttl {
			t.Fatalf("the holder still held %s after its lease stopped (lease %s)", 5*ttl, ttl)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
