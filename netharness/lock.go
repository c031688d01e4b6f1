package netharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultLockPath is the lock every harness network holds for its life.
// Only one process on the host can own 169.254.169.254:80, so runs take
// turns: a second run waits (bounded by its context) until the first closes
// its Network or dies. flock locks die with their holder, so a crashed run
// never blocks the next one; its leftovers are swept instead.
const DefaultLockPath = "/run/sandcheck/harness.lock"

// lockPoll is how often a waiting run retries the lock.
const lockPoll = 100 * time.Millisecond

// hostLock is a held exclusive flock.
type hostLock struct{ f *os.File }

// acquireLock takes the exclusive lock at path, waiting until ctx ends.
func acquireLock(ctx context.Context, path string) (*hostLock, error) {
	return acquireLockNotify(ctx, path, nil)
}

// acquireLockNotify is acquireLock; when the lock is held by another
// process, onWait (if set) is told at once, once, with what holds it (see
// lockHolder), so a waiting run can say why it does nothing.
func acquireLockNotify(ctx context.Context, path string, onWait func(holder string)) (*hostLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening harness lock: %w", err)
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if onWait != nil {
			onWait(lockHolder(path))
			onWait = nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for harness lock %s (held by %s): %w", path, lockHolder(path), context.Cause(ctx))
		case <-t.C:
		}
	}
	// The pid is informational only: it names the holder in the error a
	// waiting run reports.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &hostLock{f: f}, nil
}

// holder reads the pid the current holder wrote, for error messages.
func holder(path string) string {
	b := make([]byte, 16)
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	n, _ := f.Read(b)
	if n == 0 {
		return "?"
	}
	return string(bytes.TrimSpace(b[:n]))
}

// maxHolderCmdline bounds what is read of the holder's command line.
const maxHolderCmdline = 4096

// lockHolder names the process that holds the lock at path, as far as it is
// known: "pid N (its command line)" while that process lives, "pid N" when
// its command line cannot be read, "an unknown process" when the holder
// wrote no pid.
func lockHolder(path string) string {
	pid := holder(path)
	if _, err := strconv.Atoi(pid); err != nil {
		return "an unknown process"
	}
	f, err := os.Open(filepath.Join("/proc", pid, "cmdline"))
	if err != nil {
		return "pid " + pid
	}
	defer f.Close()
	b := make([]byte, maxHolderCmdline)
	n, _ := io.ReadFull(f, b)
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b[:n]), "\x00", " "))
	if cmd == "" {
		return "pid " + pid
	}
	if len(cmd) > 200 {
		cmd = cmd[:200] + "..."
	}
	return fmt.Sprintf("pid %s (%s)", pid, cmd)
}

// release drops the lock; safe on nil and twice.
func (l *hostLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	// Closing the descriptor drops the flock; the file stays so waiters
	// keep locking the same inode.
	if err := f.Close(); err != nil {
		return fmt.Errorf("releasing harness lock: %w", err)
	}
	return nil
}
