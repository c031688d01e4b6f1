package impl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Disk fill bounds (catalog: 256 MiB), written in 1 MiB chunks.
const (
	diskBoundMiB = 256
	diskChunk    = 1 << 20
)

// diskFillDirs are the writable places a task could fill: scratch, the
// temporary folders and the home folder (on the root filesystem when no
// volume is mounted there).
func diskFillDirs() []string {
	dirs := []string{"/scratch"}
	if d := os.Getenv("TMPDIR"); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, "/tmp", "/var/tmp")
	if h := os.Getenv("HOME"); h != "" && h != "/" {
		dirs = append(dirs, h)
	}
	return dirs
}

// diskRefused reports the errors a bounded or read-only filesystem gives.
func diskRefused(n unix.Errno) bool {
	return n == unix.ENOSPC || n == unix.EDQUOT || n == unix.EFBIG || refusedErrno(n)
}

// diskFill writes a new file of up to the bound in each place in turn,
// removing it at once, and stops at the first place that takes the whole
// bound. Every place refusing before the bound (no space, quota, read-only,
// no access) is blocked.
func diskFill(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	e.setInt("bound_mib", diskBoundMiB)
	name := fmt.Sprintf(".sandcheck-fill-%d-%s", os.Getpid(), fileSafe(p.Token))
	chunk := make([]byte, diskChunk)
	for i := range chunk {
		chunk[i] = byte(i*13 + 1) // not zeros: no filesystem stores it sparse or deduplicated
	}
	seen := map[string]bool{}
	var unknown []string
	tested := 0
	for _, dir := range diskFillDirs() {
		dir = filepath.Clean(dir)
		var st unix.Stat_t
		if seen[dir] || unix.Stat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		seen[dir] = true
		tested++
		mib, errno, err := fillOne(ctx, filepath.Join(dir, name), chunk)
		key := pathKey(dir)
		switch {
		case err != nil:
			e.set(key, fmt.Sprintf("%d MiB, then %s", mib, err))
			if ctx.Err() != nil {
				return inconclusive(fmt.Sprintf("the deadline came at %d MiB in %s", mib, dir), e)
			}
			if !diskRefused(errno) {
				unknown = append(unknown, dir)
			}
		default:
			e.set(key, fmt.Sprintf("%d MiB written and removed", mib))
			return escaped(fmt.Sprintf("wrote %d MiB to %s without being stopped", mib, dir), e)
		}
	}
	switch {
	case tested == 0:
		return inconclusive("none of the places to fill exists", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error filling "+strings.Join(unknown, ", "), e)
	}
	return blocked(fmt.Sprintf("every writable place refused before %d MiB", diskBoundMiB), e)
}

// fillOne writes chunks to a new file (never an existing one) up to the bound
// and removes it whatever happens. It returns the MiB written and, when
// stopped, the errno and error.
func fillOne(ctx context.Context, path string, chunk []byte) (int, unix.Errno, error) {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		n, _ := errnoOf(err)
		return 0, n, fmt.Errorf("create: %s", errnoLabel(n))
	}
	defer unix.Unlink(path)
	defer unix.Close(fd)
	mib := 0
	for mib < diskBoundMiB {
		if ctx.Err() != nil {
			return mib, 0, ctx.Err()
		}
		off := 0
		for off < len(chunk) {
			w, err := unix.Write(fd, chunk[off:])
			if err != nil {
				n, _ := errnoOf(err)
				return mib, n, fmt.Errorf("write: %s", errnoLabel(n))
			}
			if w == 0 {
				return mib, unix.ENOSPC, fmt.Errorf("write: no progress")
			}
			off += w
		}
		mib++
	}
	// The data must really be on the filesystem: a limit enforced on write
	// back (a quota, a full disk) shows up here.
	if err := unix.Fsync(fd); err != nil {
		n, _ := errnoOf(err)
		return mib, n, fmt.Errorf("fsync: %s", errnoLabel(n))
	}
	return mib, 0, nil
}
