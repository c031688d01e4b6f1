package impl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Host reach through the process table: the host's PID namespace (a canary
// process the harness runs on the host shows up in /proc) and /proc/1/root
// (process 1's root leads to the host's filesystem, where the harness planted
// a honeyfile in the run's own folder, which no sandbox mounts).

func init() {
	register(map[string]Func{
		"host.pid-namespace": hostPIDNamespace,
		"host.proc1-root":    hostProc1Root,
	})
}

// Bounds of the /proc scan.
const (
	procScanMaxPIDs = 8192 // processes looked at
	cmdlineReadMax  = 512  // bytes of each command line read
)

// hostPIDNamespace lists /proc and reads the start of each process's command
// line, looking for the harness's canary process (argv[0] starts with
// probes.CanaryProcPrefix). Only the host's PID namespace holds it.
func hostPIDNamespace(ctx context.Context, _ probes.Params) probes.Result {
	e := ev{}
	names, err := listProc()
	if err != nil {
		e.setErr("readdir_", err)
		return inconclusive("/proc could not be listed", e)
	}
	pids := min(len(names), procScanMaxPIDs)
	e.setInt("processes_visible", pids)
	found, tokens := findCanaryProcs(ctx)
	if len(found) == 0 {
		return blocked(fmt.Sprintf("%d process(es) visible, none of them a harness canary process on the host", pids), e)
	}
	e.set("canary_process_token", strings.Join(tokens, ","))
	e.set("canary_process_pid", strings.Join(found, ","))
	return escaped(fmt.Sprintf("%d harness canary process(es) on the host visible (pid %s) among %d processes: the box shares the host's PID namespace", len(found), strings.Join(found, ", "), pids), e)
}

// readArg0 returns argv[0] of a /proc/<pid>/cmdline, bounded; "" if unreadable.
func readArg0(path string) string {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	buf := make([]byte, cmdlineReadMax)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return ""
	}
	arg0, _, _ := bytes.Cut(buf[:n], []byte{0})
	return string(arg0)
}

// hostProc1Root opens the harness's run-folder honeyfile through
// /proc/1/root. Process 1's root is the box's own root unless process 1 is the
// host's init (a shared PID namespace); entering it also needs ptrace read
// access to process 1 (CAP_SYS_PTRACE for another user's process). Some hosts'
// init refuses even host root (this project's VM init does): the probe then
// takes the root of the harness's canary process on the host, if visible,
// the same path one process further. No other link on the way is followed.
func hostProc1Root(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.HostHoney == "" {
		return inconclusive("the harness named no run-folder honeyfile to look for", e)
	}
	roots := []string{"/proc/1/root"}
	if pids, _ := findCanaryProcs(ctx); len(pids) > 0 {
		roots = append(roots, "/proc/"+pids[0]+"/root")
	}
	var own unix.Stat_t
	ownErr := unix.Stat("/", &own)
	var unknown []string
	for _, r := range roots {
		key := pathKey(r)
		var st unix.Stat_t
		if err := unix.Stat(r+"/", &st); err != nil {
			n, _ := errnoOf(err)
			e.set(key, "enter "+errnoLabel(n))
			continue
		}
		if ownErr == nil && own.Dev == st.Dev && own.Ino == st.Ino {
			e.set(key, "the box's own root")
			continue
		}
		tok, err := readHoneyNoFollow(r, filepath.Clean(p.HostHoney))
		if err == nil {
			e.set(key, "the host's root")
			e.set("honeyfile_path", r+p.HostHoney)
			e.set("honeyfile_token", tok)
			return escaped("read the harness's run-folder honeyfile through "+r+": it leads to the host's root", e)
		}
		n, _ := errnoOf(err)
		e.set(key, "honeyfile "+errnoLabel(n))
		switch n {
		case unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.EPERM, unix.ELOOP, unix.EXDEV:
		default:
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		return inconclusive("unexpected error opening the honeyfile through "+strings.Join(unknown, ", "), e)
	}
	return blocked("no process root the box can enter leads to the host's honeyfile", e)
}

// canaryProcMax bounds the canary processes reported: runs of other
// sandcheck users on the same host have their own.
const canaryProcMax = 16

// findCanaryProcs returns the pids and tokens of the harness canary processes
// the box sees (its own run's and any other run's on the same host).
func findCanaryProcs(ctx context.Context) (pids, tokens []string) {
	names, _ := listProc()
	for i, n := range names {
		if i >= procScanMaxPIDs || ctx.Err() != nil || len(pids) >= canaryProcMax {
			break
		}
		if tok, ok := strings.CutPrefix(readArg0("/proc/"+n+"/cmdline"), probes.CanaryProcPrefix); ok {
			pids = append(pids, n)
			tokens = append(tokens, fileSafe(clip(tok, 64)))
		}
	}
	return pids, tokens
}

// listProc returns the numeric entries of /proc, bounded.
func listProc() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(procScanMaxPIDs * 2)
	var pids []string
	for _, n := range names {
		if pid, perr := strconv.Atoi(n); perr == nil && pid > 0 {
			pids = append(pids, n)
		}
	}
	if len(pids) == 0 && err != nil {
		return nil, err
	}
	return pids, nil
}

// readHoneyNoFollow opens root+path without following any symbolic link
// below root (root itself is the magic link the probe is about), and reads
// the honeyfile's first line.
func readHoneyNoFollow(root, path string) (string, error) {
	rest := strings.TrimPrefix(path, "/")
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", root, err)
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
	fd, err := unix.Openat2(dir, rest, &how)
	unix.Close(dir)
	if err == unix.ENOSYS {
		// No openat2 (gVisor, old kernels): walk it ourselves.
		fd, err = openNoFollow(root, rest)
	}
	if err != nil {
		return "", fmt.Errorf("opening %s%s: %w", root, path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("%s%s is not a regular file: %w", root, path, unix.ENOENT)
	}
	buf := make([]byte, honeyReadMax)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return "", fmt.Errorf("reading %s%s: %w", root, path, err)
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	return clip(string(bytes.TrimSpace(line)), honeyTokenMax), nil
}

// openNoFollow opens base/rel one component at a time with O_NOFOLLOW.
func openNoFollow(base, rel string) (int, error) {
	cur, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		if part == "" || part == "." || part == ".." {
			unix.Close(cur)
			return -1, unix.EINVAL
		}
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
		}
		next, err := unix.Openat(cur, part, flags, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}
