package netharness

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockWaitIsReported holds a harness lock (as another run would) and
// checks a second taker is told at once that it waits, and by whom. Before,
// a waiting run said nothing until it got the lock (53 s in issue 16).
func TestLockWaitIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.lock")
	held, err := acquireLock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.release()

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	told := make(chan string, 2)
	var at time.Duration
	_, err = acquireLockNotify(ctx, path, func(h string) {
		at = time.Since(start)
		told <- h
	})
	if err == nil {
		t.Fatal("took a lock another holder has")
	}
	if !strings.Contains(err.Error(), "held by pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("the timeout error does not name the holder: %v", err)
	}
	if len(told) != 1 {
		t.Fatalf("told %d times of the wait, want once", len(told))
	}
	h := <-told
	if at > time.Second {
		t.Errorf("told of the wait after %s, want within a second", at)
	}
	want := "pid " + strconv.Itoa(os.Getpid()) + " ("
	if !strings.HasPrefix(h, want) || !strings.Contains(h, filepath.Base(os.Args[0])) {
		t.Errorf("holder %q: want %q and this test's command line", h, want)
	}

	// A free lock is taken without a word.
	held.release()
	l, err := acquireLockNotify(context.Background(), path, func(string) { t.Error("told of a wait on a free lock") })
	if err != nil {
		t.Fatal(err)
	}
	l.release()
}

// TestLockHolderUnknown: a lock file with no pid names no process.
func TestLockHolderUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if h := lockHolder(path); h != "an unknown process" {
		t.Errorf("holder of an empty lock file: %q", h)
	}
}
