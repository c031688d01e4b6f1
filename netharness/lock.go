package netharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for harness lock %s (held by pid %s): %w", path, holder(path), context.Cause(ctx))
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
