package docker

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestTaskOOMIsSeen runs a task that allocates past its sandbox's memory
// limit under runc and runsc, a few rounds each, and requires the kernel's
// OOM notification to reach the sandbox's watch every time, whatever the
// engine's own State.OOMKilled says (which under load arrived in only some
// runs), and the view to say OOM-killed once the task is over. A task that
// stays under its limit must not be called OOM-killed.
func TestTaskOOMIsSeen(t *testing.T) {
	requireEngine(t)
	if testing.Short() {
		t.Skip("starts sandboxes: not in -short")
	}
	for _, runtime := range []string{"runc", "runsc"} {
		for round := 1; round <= 2; round++ {
			for _, over := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%d/over=%v", runtime, round, over), func(t *testing.T) {
					requireRuntime(t, runtime)
					cfg := hardened(runtime)
					cfg.Memory = "32Mi"
					spec, _ := testSpec(t, fakeProbe(t))
					size := "8M"
					if over {
						size = "96M"
					}
					// dd's buffer of bs bytes is allocated and filled at once,
					// a second after the start (a probe, too, starts before it
					// allocates: a task dead within milliseconds of its start
					// has only the engine's word).
					spec.Command = []string{"/bin/sh", "-c", "sleep 1; exec dd if=/dev/zero of=/dev/null bs=" + size + " count=1"}
					sb := start(t, cfg, spec)
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					res, err := sb.Wait(ctx)
					if err != nil {
						t.Fatalf("Wait: %v", err)
					}
					v, err := sb.Inspect(ctx)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("exit %d, watch %v, engine+watch view OOMKilled %v", res.ExitCode, sb.oom.Seen(), v.OOMKilled)
					if sb.oom == nil {
						t.Fatal("no OOM watch was started for the task")
					}
					if got := sb.oom.Seen(); got != over {
						t.Errorf("the OOM watch saw an OOM: %v, want %v (exit %d)", got, over, res.ExitCode)
					}
					if v.OOMKilled != over {
						t.Errorf("the view says OOM-killed: %v, want %v", v.OOMKilled, over)
					}
				})
			}
		}
	}
}
