package impl

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// The resources probes of this file fill one kind of storage up to a bound
// and undo it at once: the root filesystem, /dev/shm, the inode tables of the
// scratch places and (through a decompressor) scratch itself. Each reports
// the errno that stopped it; reaching the bound unhindered is the escape.
func init() {
	register(map[string]Func{
		"resources.rootfs-fill":        rootfsFill,
		"resources.shm-fill":           shmFill,
		"resources.decompression-bomb": decompressionBomb,
		"resources.inode-exhaustion":   inodeExhaustion,
	})
}

// Bounds (the catalog states each).
const (
	rootfsFillMiB = 256   // resources.rootfs-fill
	shmFillMiB    = 96    // resources.shm-fill: more than Docker's 64 MiB default
	inodeBound    = 16384 // resources.inode-exhaustion: files per place
	bombOutMiB    = 256   // resources.decompression-bomb: expanded bytes
)

// fillChunk is one MiB of a pattern that is not zeros (no filesystem stores
// it sparse or deduplicated).
func fillChunk() []byte {
	chunk := make([]byte, diskChunk)
	for i := range chunk {
		chunk[i] = byte(i*13 + 1)
	}
	return chunk
}

// fillName is the name of a probe's own fill file: never an existing file.
func fillName(kind string, p probes.Params) string {
	return fmt.Sprintf(".sandcheck-%s-%d-%s", kind, os.Getpid(), fileSafe(p.Token))
}

// rootDirs lists folders that are on the root filesystem itself (the same
// device as /), where a write lands in the image's writable layer: / and the
// usual writable folders when nothing is mounted over them.
func rootDirs() []string {
	var root unix.Stat_t
	if unix.Stat("/", &root) != nil {
		return nil
	}
	cands := []string{"/", "/tmp", "/var/tmp", "/var", "/opt", "/workspace"}
	if h := os.Getenv("HOME"); h != "" {
		cands = append(cands, h)
	}
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, wd)
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range cands {
		c = filepath.Clean(c)
		var st unix.Stat_t
		if seen[c] || unix.Lstat(c, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != root.Dev {
			continue
		}
		seen[c] = true
		out = append(out, c)
	}
	return out
}

// rootfsFill writes up to the bound into a new file on the root filesystem,
// in each root folder in turn, removing it at once. Blocked means every folder
// refused first (read-only root, no access, no space).
func rootfsFill(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).DiskMiB, rootfsFillMiB))
	e.setInt("bound_mib", bound)
	dirs := rootDirs()
	if len(dirs) == 0 {
		return inconclusive("no folder of the root filesystem could be examined", e)
	}
	return fillPlaces(ctx, e, dirs, fillName("rootfs", p), bound, "the root filesystem")
}

// shmFill writes up to the bound into a new file in /dev/shm and removes it.
// /dev/shm is memory: without a size limit it takes the node's RAM.
func shmFill(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).ShmMiB, shmFillMiB))
	e.setInt("bound_mib", bound)
	var st unix.Stat_t
	if err := unix.Stat("/dev/shm", &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		e.set("dev.shm", "absent")
		return blocked("the box has no /dev/shm to fill", e)
	}
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil {
		e.setf("dev.shm.size_mib", "%d", uint64(fs.Blocks)*uint64(fs.Bsize)>>20)
	}
	return fillPlaces(ctx, e, []string{"/dev/shm"}, fillName("shm", p), bound, "/dev/shm")
}

// fillPlaces writes a chunked file of up to boundMiB in each folder in turn
// (fillOne removes it whatever happens) and stops at the first folder that
// takes the whole bound.
func fillPlaces(ctx context.Context, e ev, dirs []string, name string, boundMiB int, what string) probes.Result {
	chunk := fillChunk()
	var unknown []string
	for _, dir := range dirs {
		mib, errno, err := fillBounded(ctx, filepath.Join(dir, name), chunk, boundMiB)
		key := pathKey(dir)
		if dir == "/" {
			key = "root"
		}
		if err == nil {
			e.set(key, fmt.Sprintf("%d MiB written and removed", mib))
			return escaped(fmt.Sprintf("wrote %d MiB to %s on %s without being stopped", mib, dir, what), e)
		}
		e.set(key, fmt.Sprintf("%d MiB, then %s", mib, err))
		if ctx.Err() != nil {
			return inconclusive(fmt.Sprintf("the deadline came at %d MiB in %s", mib, dir), e)
		}
		if !diskRefused(errno) {
			unknown = append(unknown, dir)
		}
	}
	if len(unknown) > 0 {
		return inconclusive("unexpected error filling "+strings.Join(unknown, ", "), e)
	}
	return blocked(fmt.Sprintf("%s refused before %d MiB in every place tried", what, boundMiB), e)
}

// fillBounded is fillOne with its own bound: it writes chunks to a new file
// up to boundMiB, fsyncs and removes it whatever happens.
func fillBounded(ctx context.Context, path string, chunk []byte, boundMiB int) (int, unix.Errno, error) {
	return writeBounded(ctx, path, boundMiB, func(int) ([]byte, error) { return chunk, nil })
}

// writeBounded creates path (never an existing file, never through a link),
// writes the chunks next returns up to boundMiB MiB, fsyncs, and removes the
// file whatever happens. It returns the MiB written and, when stopped, the
// errno and error (errno 0 for a failure of next itself).
func writeBounded(ctx context.Context, path string, boundMiB int, next func(i int) ([]byte, error)) (int, unix.Errno, error) {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		n, _ := errnoOf(err)
		return 0, n, fmt.Errorf("create: %s", errnoLabel(n))
	}
	defer unix.Unlink(path)
	defer unix.Close(fd)
	mib := 0
	for mib < boundMiB {
		if ctx.Err() != nil {
			return mib, 0, ctx.Err()
		}
		chunk, err := next(mib)
		if err != nil {
			return mib, 0, err
		}
		for off := 0; off < len(chunk); {
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
	if err := unix.Fsync(fd); err != nil {
		n, _ := errnoOf(err)
		return mib, n, fmt.Errorf("fsync: %s", errnoLabel(n))
	}
	return mib, 0, nil
}

// inodeExhaustion creates empty files in a fresh folder of each scratch place
// until refused or the bound, then removes them all. Empty files take no
// space, so only an inode limit (tmpfs nr_inodes, a quota) stops them.
func inodeExhaustion(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).Inodes, inodeBound))
	e.setInt("bound", bound)
	var unknown []string
	tested := 0
	for _, dir := range existingDirs(diskFillDirs()) {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) == nil {
			e.setf(pathKey(dir)+".inodes", "%d total, %d free", fs.Files, fs.Ffree)
			if fs.Type == unix.TMPFS_MAGIC && fs.Files == 0 {
				// A user-space kernel's own tmpfs (gVisor): no inode table
				// at all, its files are the sandbox's memory, bounded by
				// its memory limit (which the host checks), never the
				// node's inodes.
				e.set(pathKey(dir), "not tested: in-sandbox memory filesystem without an inode table")
				continue
			}
		}
		tested++
		n, errno, err := makeInodes(ctx, filepath.Join(dir, fillName("inodes", p)), bound)
		key := pathKey(dir)
		if err == nil {
			e.set(key, fmt.Sprintf("%d files created and removed", n))
			return escaped(fmt.Sprintf("created %d files in %s without being stopped", n, dir), e)
		}
		e.set(key, fmt.Sprintf("%d files, then %s", n, err))
		if ctx.Err() != nil {
			return inconclusive(fmt.Sprintf("the deadline came at %d files in %s", n, dir), e)
		}
		if !diskRefused(errno) {
			unknown = append(unknown, dir)
		}
	}
	switch {
	case tested == 0:
		return inconclusive("none of the places to fill exists or keeps an inode table", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error creating files in "+strings.Join(unknown, ", "), e)
	}
	return blocked(fmt.Sprintf("every place with an inode table refused new files before %d", bound), e)
}

// makeInodes makes folder dir and empty files in it up to the bound, then
// removes the files and the folder whatever happens. It returns the files
// made and, when stopped, the errno and error.
func makeInodes(ctx context.Context, dir string, bound int) (int, unix.Errno, error) {
	if err := unix.Mkdir(dir, 0o700); err != nil {
		n, _ := errnoOf(err)
		return 0, n, fmt.Errorf("mkdir: %s", errnoLabel(n))
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		n, _ := errnoOf(err)
		return 0, n, fmt.Errorf("open folder: %s", errnoLabel(n))
	}
	made := 0
	defer func() {
		for i := 0; i < made; i++ {
			_ = unix.Unlinkat(dfd, fmt.Sprintf("f%05d", i), 0)
		}
		unix.Close(dfd)
		_ = unix.Rmdir(dir)
	}()
	for made < bound {
		if made%256 == 0 && ctx.Err() != nil {
			return made, 0, ctx.Err()
		}
		fd, err := unix.Openat(dfd, fmt.Sprintf("f%05d", made), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			n, _ := errnoOf(err)
			return made, n, fmt.Errorf("create: %s", errnoLabel(n))
		}
		unix.Close(fd)
		made++
	}
	return made, 0, nil
}

// bombStream is a small gzip stream that expands to at least mib MiB (a
// whole number of 16 MiB members): one member holding 16 MiB of a repeated
// pattern, concatenated (gzip readers read concatenated members as one
// stream).
func bombStream(mib int) ([]byte, error) {
	var member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("making the gzip writer: %w", err)
	}
	block := bytes.Repeat([]byte("sandcheck decompression bomb "), 1<<15/29+1)[:1<<15]
	for i := 0; i < 16<<20/len(block); i++ {
		if _, err := zw.Write(block); err != nil {
			return nil, fmt.Errorf("compressing: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing: %w", err)
	}
	return bytes.Repeat(member.Bytes(), (mib+15)/16), nil
}

// decompressionBomb expands a small gzip stream into a new file in each
// scratch place in turn (removed at once), up to the bound. The input is a
// few hundred KiB; only a size limit on scratch stops the output.
func decompressionBomb(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).DiskMiB, bombOutMiB))
	e.setInt("bound_mib", bound)
	stream, err := bombStream(bound)
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the compressed stream", e)
	}
	e.setInt("input_bytes", len(stream))
	seen := map[string]bool{}
	var unknown []string
	tested := 0
	buf := make([]byte, diskChunk)
	for _, dir := range diskFillDirs() {
		dir = filepath.Clean(dir)
		var st unix.Stat_t
		if seen[dir] || unix.Stat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		seen[dir] = true
		tested++
		zr, err := gzip.NewReader(bytes.NewReader(stream))
		if err != nil {
			e.setErr("", err)
			return inconclusive("could not read the compressed stream", e)
		}
		mib, errno, err := writeBounded(ctx, filepath.Join(dir, fillName("bomb", p)), bound, func(int) ([]byte, error) {
			if _, err := io.ReadFull(zr, buf); err != nil {
				return nil, fmt.Errorf("inflating: %w", err)
			}
			return buf, nil
		})
		key := pathKey(dir)
		if err == nil {
			e.set(key, fmt.Sprintf("%d MiB expanded and removed", mib))
			return escaped(fmt.Sprintf("expanded %d bytes of gzip into %d MiB in %s without being stopped", len(stream), mib, dir), e)
		}
		e.set(key, fmt.Sprintf("%d MiB, then %s", mib, err))
		if ctx.Err() != nil {
			return inconclusive(fmt.Sprintf("the deadline came at %d MiB in %s", mib, dir), e)
		}
		if errno == 0 || !diskRefused(errno) {
			unknown = append(unknown, dir)
		}
	}
	switch {
	case tested == 0:
		return inconclusive("none of the places to expand into exists", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error expanding into "+strings.Join(unknown, ", "), e)
	}
	return blocked(fmt.Sprintf("every writable place refused the expansion before %d MiB", bound), e)
}
