package impl

import (
	"context"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func TestClassifyMemHog(t *testing.T) {
	exited := func(code int) syscall.WaitStatus { return syscall.WaitStatus(code << 8) }
	signaled := func(s syscall.Signal) syscall.WaitStatus { return syscall.WaitStatus(s) }
	tests := []struct {
		name string
		ws   syscall.WaitStatus
		last string
		want probes.Outcome
	}{
		{"reached the bound", exited(0), "done 640", probes.Escaped},
		{"oom killed", signaled(syscall.SIGKILL), "at 112", probes.Blocked},
		{"mapping refused", exited(3), "err ENOMEM 96", probes.Blocked},
		{"exit 0 without done", exited(0), "at 16", probes.Inconclusive},
		{"crashed", signaled(syscall.SIGSEGV), "at 16", probes.Inconclusive},
		{"other mapping error", exited(3), "err EINVAL 0", probes.Inconclusive},
	}
	for _, tt := range tests {
		if got, _ := classifyMemHog(tt.ws, tt.last, 0); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestMemHogSmallBound runs the real child (the test binary re-executed, see
// TestMain) with a bound small enough for any machine.
func TestMemHogSmallBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := memHog(ctx, 32, 8)
	if r.Outcome != probes.Escaped || r.Evidence["reached_mib"] != "32" {
		t.Fatalf("memHog(32 MiB) = %s %v: %s", r.Outcome, r.Evidence, r.Detail)
	}
}

// TestForkSleeper forks a few raw sleepers and checks that killAll leaves none.
func TestForkSleeper(t *testing.T) {
	life := unix.NsecToTimespec(int64(10 * time.Second))
	ppid := uintptr(unix.Getpid())
	var pids []int
	for i := 0; i < 3; i++ {
		pid, errno := forkSleeper(ppid, &life)
		if errno != 0 {
			killAll(pids)
			t.Fatalf("fork %d: %v", i, errno)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, 0); err != nil {
			t.Errorf("sleeper %d is not running: %v", pid, err)
		}
	}
	killAll(pids)
	for _, pid := range pids {
		if err := unix.Kill(pid, 0); err != unix.ESRCH {
			t.Errorf("sleeper %d survived killAll: %v", pid, err)
		}
	}
}
