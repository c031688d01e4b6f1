package impl

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBombStreamIsSmallAndExpandsToTheBound(t *testing.T) {
	s, err := bombStream(bombOutMiB)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) > 1<<20 {
		t.Errorf("the compressed stream is %d bytes; a bomb is small", len(s))
	}
	zr, err := gzip.NewReader(bytes.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil || n != bombOutMiB<<20 {
		t.Errorf("expanded to %d bytes (%v), want %d", n, err, bombOutMiB<<20)
	}
}

func TestWriteBoundedStopsAtTheBoundAndRemoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	calls := 0
	mib, errno, err := writeBounded(context.Background(), path, 3, func(int) ([]byte, error) {
		calls++
		return make([]byte, diskChunk), nil
	})
	if err != nil || errno != 0 || mib != 3 || calls != 3 {
		t.Errorf("writeBounded = %d MiB, %v, %v after %d chunks; want 3 MiB", mib, errno, err, calls)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the fill file was left behind: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errno, _ := writeBounded(context.Background(), path, 1, nil); errno != unix.EEXIST {
		t.Errorf("an existing file was written over (errno %v)", errno)
	}
}

func TestMakeInodesRemovesEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inodes")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, _, err := makeInodes(ctx, dir, inodeBound)
	if err == nil || n != 0 {
		t.Errorf("a cancelled context made %d files (err %v)", n, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the folder was left behind: %v", err)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// reapChildren waits for any exited child of the test process (the plain
// and noterm kinds are its own children here).
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
