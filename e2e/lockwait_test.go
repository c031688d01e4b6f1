package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLockWaitSaysSo holds the host's harness lock as a live run would and
// starts a run that needs the harness network: within a second of starting
// to wait it must say that it waits and what holds the lock. Before, it
// printed nothing until the lock came free (53 s in issue 16).
func TestLockWaitSaysSo(t *testing.T) {
	bin := binDir(t)
	const lockPath = "/run/sandcheck/harness.lock"
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Bounded: another run on the machine may hold it.
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the harness lock stayed held for 10 minutes")
		}
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
	}
	defer release()
	me := strconv.Itoa(os.Getpid())
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(me+"\n"), 0); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/weak.yaml",
		"--probes", "attribution.hostname", "--out-dir", t.TempDir(), "--quiet")
	cmd.Dir = ".."
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type line struct {
		at   time.Duration
		text string
	}
	lines := make(chan line, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- line{time.Since(start), sc.Text()}
		}
	}()
	// The start-up sweep waits up to 5 s for the lock, then the run's own
	// network waits until the lock is free: each must say so at once.
	var said []line
	timeout := time.After(60 * time.Second)
	for len(said) < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the run ended while the lock was held; said %v", said)
			}
			t.Logf("%5.2fs %s", l.at.Seconds(), l.text)
			if strings.Contains(l.text, "waiting") && strings.Contains(l.text, "harness lock") {
				if !strings.Contains(l.text, "pid "+me) {
					t.Errorf("the wait does not name the holder, pid %s: %s", me, l.text)
				}
				said = append(said, l)
			}
		case <-timeout:
			t.Fatalf("60 s with the lock held and the run said %d times that it waits", len(said))
		}
	}
	// The sweep gives up after 5 s; the network's wait must be told within
	// a second of it. The first line comes after only the engine's
	// preflight (a second or two on this machine, more under load).
	if gap := said[1].at - said[0].at; gap > 6*time.Second {
		t.Errorf("the network's wait was told %s after the sweep's, want within a second of the sweep's 5 s", gap)
	}
	t.Logf("told of the wait at %.2fs and %.2fs after start", said[0].at.Seconds(), said[1].at.Seconds())

	// Once the lock is free the run goes on to its verdict.
	release()
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 {
			t.Errorf("the run failed as the harness's fault once the lock was free: %v", err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the run did not end within 5 minutes of the lock coming free")
	}
}
