package docker

import (
	"context"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// TestExecFloodIsCappedNotBroken: 100 MB on stdout and on stderr of one exec
// keep at most runners.MaxOutput each, set Truncated, and return the
// process's own exit code with no error (the flood is the probe's doing,
// not a broken stream).
func TestExecFloodIsCappedNotBroken(t *testing.T) {
	requireEngine(t)
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			requireRuntime(t, runtime)
			spec, _ := testSpec(t, fakeProbe(t))
			sb := start(t, hardened(runtime), spec)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			t0 := time.Now()
			res, err := sb.Exec(ctx, []string{"/bin/sh", "-c", "head -c 100000000 /dev/zero; head -c 100000000 /dev/zero >&2; exit 3"})
			t.Logf("%s: exit %d, stdout %d, stderr %d, truncated %v, %s, err %v", runtime, res.ExitCode, len(res.Stdout), len(res.Stderr), res.Truncated, time.Since(t0), err)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if res.ExitCode != 3 || !res.Truncated || len(res.Stdout) != runners.MaxOutput || len(res.Stderr) != runners.MaxOutput {
				t.Errorf("exit %d truncated %v stdout %d stderr %d", res.ExitCode, res.Truncated, len(res.Stdout), len(res.Stderr))
			}
		})
	}
}

// TestTaskFloodIsCappedNotBroken: the same flood from a task sandbox's first
// process, whose output is followed through the engine's logs (bounded on
// the host at 1 MB, so the engine rotates them mid-flood).
func TestTaskFloodIsCappedNotBroken(t *testing.T) {
	requireEngine(t)
	spec, _ := testSpec(t, fakeProbe(t))
	spec.Command = []string{"/bin/sh", "-c", "head -c 100000000 /dev/zero; head -c 100000000 /dev/zero >&2; exit 3"}
	sb := start(t, hardened("runc"), spec)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := sb.Wait(ctx)
	t.Logf("exit %d, stdout %d, stderr %d, truncated %v, %s, err %v", res.ExitCode, len(res.Stdout), len(res.Stderr), res.Truncated, time.Since(t0), err)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.ExitCode != 3 || !res.Truncated || len(res.Stdout) > runners.MaxOutput || len(res.Stderr) > runners.MaxOutput {
		t.Errorf("exit %d truncated %v stdout %d stderr %d", res.ExitCode, res.Truncated, len(res.Stdout), len(res.Stderr))
	}
}
