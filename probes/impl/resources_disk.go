package impl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"resources.disk-fill": diskFill})
}

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

// existingDirs returns the folders of dirs that exist, cleaned and each once.
func existingDirs(dirs []string) []string {
	var out []string
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		var st unix.Stat_t
		if slices.Contains(out, dir) || unix.Stat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		out = append(out, dir)
	}
	return out
}

// diskFill writes a new file of up to the bound in each place in turn,
// removing it at once, and stops at the first place that takes the whole
// bound. Every place refusing before the bound (no space, quota, read-only,
// no access) is blocked.
func diskFill(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).DiskMiB, diskBoundMiB))
	e.setInt("bound_mib", bound)
	dirs := existingDirs(diskFillDirs())
	if len(dirs) == 0 {
		return inconclusive("none of the places to fill exists", e)
	}
	name := fmt.Sprintf(".sandcheck-fill-%d-%s", os.Getpid(), fileSafe(p.Token))
	return fillPlaces(ctx, e, dirs, name, bound, "disk")
}

// fillOne writes chunks to a new file (never an existing one) up to the
// disk bound, fsyncs (a limit enforced on write back, a quota or a full disk,
// shows there) and removes it whatever happens. It returns the MiB written
// and, when stopped, the errno and error.
func fillOne(ctx context.Context, path string, chunk []byte) (int, unix.Errno, error) {
	return fillBounded(ctx, path, chunk, diskBoundMiB)
}
