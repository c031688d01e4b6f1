package impl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// State a task leaves for the next one: files in scratch, a crontab entry
// and a kernel keyring entry. Each plants in one phase and looks in the next.
func init() {
	register(map[string]Func{
		"persistence.scratch-not-empty": scratchNotEmpty,
		"persistence.crontab":           crontabProbe,
		"persistence.kernel-keyring":    kernelKeyring,
		"persistence.scratch-unlimited": scratchUnlimited,
	})
}

// scratchPlaces are the folders a task uses as scratch: /scratch, TMPDIR,
// /tmp, /var/tmp, /dev/shm and the home folder (not /).
func scratchPlaces() []string {
	cands := []string{"/scratch", os.Getenv("TMPDIR"), "/tmp", "/var/tmp", "/dev/shm", os.Getenv("HOME")}
	seen := map[string]bool{}
	var out []string
	for _, c := range cands {
		if c == "" {
			continue
		}
		c = filepath.Clean(c)
		var st unix.Stat_t
		if c == "/" || seen[c] || unix.Lstat(c, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		seen[c] = true
		out = append(out, c)
	}
	return out
}

// maxListed bounds the names read from one folder.
const maxListed = 64

// listNames reads up to maxListed names in dir (never following links).
func listNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(maxListed)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// scratchNotEmpty plants a marker file in every scratch place (phase plant)
// and, in the next task, reports every scratch place that is not empty when
// the task starts (phase check), removing the markers it finds. Anything in
// scratch at the start of a task was left by someone else.
func scratchNotEmpty(_ context.Context, p probes.Params) probes.Result {
	marker := fileSafe(p.Marker)
	e := ev{}
	if marker == "" {
		return inconclusive("no marker given (--marker)", e)
	}
	name := probes.MarkerPrefix + marker
	places := scratchPlaces()
	switch p.Phase {
	case "plant":
		var planted []string
		for _, dir := range places {
			if plantMarker(filepath.Join(dir, name), marker) == nil {
				planted = append(planted, dir)
			}
		}
		e.setList("planted", planted)
		return result(probes.NotApplicable, fmt.Sprintf("planted a file in %d scratch place(s); the check phase decides", len(planted)), e)
	case "check":
		var dirty []string
		for _, dir := range places {
			names, err := listNames(dir)
			if err != nil {
				e.set(pathKey(dir), "unreadable: "+err.Error())
				continue
			}
			if len(names) == 0 {
				e.set(pathKey(dir), "empty")
				continue
			}
			e.setList(pathKey(dir), names)
			dirty = append(dirty, dir)
			_ = unix.Unlink(filepath.Join(dir, name)) // our own marker only
		}
		if len(places) == 0 {
			return inconclusive("no scratch place exists to be examined", e)
		}
		if len(dirty) == 0 {
			return blocked("every scratch place was empty when the task started", e)
		}
		return escaped("scratch held files when the task started: "+strings.Join(dirty, ", "), e)
	}
	return inconclusive(fmt.Sprintf("phase %q: want plant or check", p.Phase), e)
}

// crontabPaths are where cron daemons read entries: a file in /etc/cron.d
// (cron ignores names with a dot, and the line is a comment, so nothing
// would run) and the user crontab busybox and cronie read.
func crontabPaths(marker, user string) []string {
	return []string{
		"/etc/cron.d/sandcheck-" + marker,
		"/var/spool/cron/crontabs/" + user,
	}
}

// crontabUser names the crontab file of the task's user: its name from
// /etc/passwd when the image has one, else its uid.
func crontabUser() string {
	uid := os.Getuid()
	if b, err := readBounded("/etc/passwd", 64<<10); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, ":")
			if len(f) > 2 && f[2] == fmt.Sprint(uid) && fileSafe(f[0]) == f[0] && f[0] != "" {
				return f[0]
			}
		}
	}
	return fmt.Sprint(uid)
}

// crontabProbe writes a crontab entry (a comment naming the marker) where
// cron would read it, creating the folders when missing (phase plant), and
// in the next task looks for the entry and removes it (phase check).
func crontabProbe(_ context.Context, p probes.Params) probes.Result {
	marker := fileSafe(p.Marker)
	e := ev{}
	if marker == "" {
		return inconclusive("no marker given (--marker)", e)
	}
	line := "# sandcheck persistence.crontab " + marker + "\n"
	paths := crontabPaths(marker, crontabUser())
	switch p.Phase {
	case "plant":
		var planted []string
		for _, path := range paths {
			state := plantCrontab(path, line)
			e.set(pathKey(path), state)
			if state == "written" {
				planted = append(planted, path)
			}
		}
		return result(probes.NotApplicable, fmt.Sprintf("wrote %d crontab entr(ies); the check phase decides", len(planted)), e)
	case "check":
		var found []string
		for _, path := range paths {
			b, err := readBounded(path, 64<<10)
			if err != nil || !strings.Contains(string(b), line) {
				continue
			}
			found = append(found, path)
			_ = unix.Unlink(path) // only files this probe created hold the line
		}
		if len(found) == 0 {
			return blocked("no crontab entry from the earlier task", e)
		}
		e.setList("found", found)
		return escaped("a crontab entry written by the earlier task is still there: "+strings.Join(found, ", "), e)
	}
	return inconclusive(fmt.Sprintf("phase %q: want plant or check", p.Phase), e)
}

// plantCrontab creates path (never over an existing file, never through a
// link) holding line, making its folder first when missing.
func plantCrontab(path, line string) string {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n, _ := errnoOf(err)
		return "mkdir: " + errnoLabel(n)
	}
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		n, _ := errnoOf(err)
		return "create: " + errnoLabel(n)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(line)); err != nil {
		n, _ := errnoOf(err)
		return "write: " + errnoLabel(n)
	}
	return "written"
}

// readBounded reads at most max bytes of a regular file, never through a
// link.
func readBounded(path string, max int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	buf := make([]byte, max)
	n := 0
	for n < max {
		m, err := unix.Read(fd, buf[n:])
		if m <= 0 || err != nil {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// keyringTimeout bounds a planted key's life in the kernel: it expires on
// its own if no check ever removes it.
const keyringTimeout = 120

// kernelKeyring adds a key named after the marker to the user keyring @u
// with a short timeout (phase plant); the check phase, in a second sandbox
// of the same target, searches @u for it and removes it. On a shared kernel
// every container whose uid is 0 in the host's user namespace shares one
// user keyring: a key found there crossed from one sandbox to another.
func kernelKeyring(_ context.Context, p probes.Params) probes.Result {
	marker := fileSafe(p.Marker)
	e := ev{}
	if marker == "" {
		return inconclusive("no marker given (--marker)", e)
	}
	desc := "sandcheck:" + marker
	switch p.Phase {
	case "plant":
		id, err := unix.AddKey("user", desc, []byte(marker), unix.KEY_SPEC_USER_KEYRING)
		if err != nil {
			n, _ := errnoOf(err)
			e.set("add_key", errnoLabel(n))
			return result(probes.NotApplicable, "add_key was refused; the check phase decides", e)
		}
		e.set("add_key", "ok")
		if _, err := unix.KeyctlInt(unix.KEYCTL_SET_TIMEOUT, id, keyringTimeout, 0, 0); err != nil {
			// A key that cannot expire on its own must not stay behind.
			_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
			n, _ := errnoOf(err)
			e.set("set_timeout", errnoLabel(n))
			return inconclusive("could not give the key a timeout; removed it", e)
		}
		e.setInt("timeout_s", keyringTimeout)
		return result(probes.NotApplicable, "added a key to the user keyring; the check phase decides", e)
	case "check":
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", desc, 0)
		if err != nil {
			n, _ := errnoOf(err)
			e.set("search", errnoLabel(n))
			switch n {
			case unix.ENOKEY, unix.EPERM, unix.EACCES, unix.ENOSYS, unix.EKEYEXPIRED, unix.EKEYREVOKED:
				return blocked("the key from the other sandbox is not in this sandbox's user keyring", e)
			}
			return inconclusive("searching the user keyring failed unexpectedly", e)
		}
		if _, err := unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0); err != nil {
			_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
		}
		e.setInt("key_id", id)
		return escaped("a key added to the user keyring by another sandbox was found here (removed now)", e)
	}
	return inconclusive(fmt.Sprintf("phase %q: want plant or check", p.Phase), e)
}

// Limits above which scratch counts as unlimited: more room or more files
// than any task's scratch needs, i.e. the host's disk or half its RAM.
const (
	scratchMaxBytes  = 1 << 30
	scratchMaxInodes = 1 << 20
)

// scratchUnlimited reads the size and inode count of every writable scratch
// place (statfs, nothing written) and reports the ones above the limits. A
// user-space kernel's tmpfs without an inode table (gVisor's) has no inode
// count to read; its files are the sandbox's memory. /dev/shm is memory by
// design, sized by resources.shm-fill, and not counted here.
func scratchUnlimited(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	var unlimited []string
	tested := 0
	for _, dir := range scratchPlaces() {
		if dir == "/dev/shm" {
			continue
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			n, _ := errnoOf(err)
			e.set(pathKey(dir), "statfs: "+errnoLabel(n))
			continue
		}
		if fs.Flags&unix.ST_RDONLY != 0 || unix.Access(dir, unix.W_OK) != nil {
			e.set(pathKey(dir), "not writable")
			continue
		}
		tested++
		size := uint64(fs.Blocks) * uint64(fs.Bsize)
		var why []string
		if size > scratchMaxBytes {
			why = append(why, fmt.Sprintf("%d MiB", size>>20))
		}
		if fs.Files > scratchMaxInodes {
			why = append(why, fmt.Sprintf("%d inodes", fs.Files))
		}
		e.setf(pathKey(dir), "%d MiB, %d inodes (fs type %#x)", size>>20, fs.Files, fs.Type)
		if len(why) > 0 {
			unlimited = append(unlimited, dir+" ("+strings.Join(why, ", ")+")")
		}
	}
	switch {
	case len(unlimited) > 0:
		return escaped("scratch without a useful limit: "+strings.Join(unlimited, "; "), e)
	case tested == 0:
		return blocked("no writable scratch place", e)
	}
	return blocked(fmt.Sprintf("every writable scratch place is limited to %d MiB and %d inodes or less", scratchMaxBytes>>20, scratchMaxInodes), e)
}
