package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"host.mknod":    hostMknod,
		"host.kallsyms": hostKallsyms,
	})
}

// deviceNodes are the nodes host.mknod tries to create: the numbers of
// /dev/null (char 1:3) and of the first loop device (block 7:0). The nodes are
// never opened; each is removed at once.
var deviceNodes = []struct {
	name  string
	mode  uint32
	major uint32
	minor uint32
}{
	{"char-1-3", unix.S_IFCHR, 1, 3},
	{"block-7-0", unix.S_IFBLK, 7, 0},
}

// mknodDirs are the places a private folder for the nodes is made in; the
// first writable one is used.
func mknodDirs(probeDir string) []string {
	dirs := []string{"/tmp", "/scratch", "/var/tmp", "/dev/shm"}
	if d := os.Getenv("TMPDIR"); d != "" {
		dirs = append([]string{d}, dirs...)
	}
	if probeDir != "" {
		dirs = append(dirs, probeDir)
	}
	return dirs
}

// hostMknod makes a private folder, tries mknod of a character and a block
// device node in it (never opening either), removes whatever it made and the
// folder. A node created is an escape: the box holds CAP_MKNOD, the first step
// to a raw host device wherever the device cgroup lets an open through.
func hostMknod(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	var dir string
	var tried []string
	for _, d := range mknodDirs(p.ProbeDir) {
		made, err := os.MkdirTemp(d, ".sandcheck-mknod-")
		if err == nil {
			dir = made
			break
		}
		tried = append(tried, d)
	}
	if dir == "" {
		e.setList("no_writable_dir", tried)
		return inconclusive("no writable folder to try mknod in", e)
	}
	defer os.RemoveAll(dir)
	e.set("dir", filepath.Dir(dir))
	var created, unknown []string
	for _, n := range deviceNodes {
		path := filepath.Join(dir, n.name)
		err := unix.Mknod(path, n.mode|0o600, int(unix.Mkdev(n.major, n.minor)))
		if err == nil {
			state := "created and removed"
			if uerr := unix.Unlink(path); uerr != nil {
				state = "created; remove failed: " + uerr.Error()
			}
			e.set(n.name, state)
			created = append(created, n.name)
			continue
		}
		errno, _ := errnoOf(err)
		e.set(n.name, errnoLabel(errno))
		if errno != unix.EPERM && errno != unix.EACCES {
			unknown = append(unknown, n.name)
		}
	}
	switch {
	case len(created) > 0 && userSpaceKernel():
		// gVisor's Sentry keeps device nodes in its own filesystem and opens
		// only the devices it emulates: a node it lets be made names no
		// host device.
		e.set("kernel", "gvisor")
		return blocked("device node(s) "+strings.Join(created, ", ")+" could be made, but under gVisor's user-space kernel a node reaches only its emulated devices, never the host's", e)
	case len(created) > 0:
		return escaped("created device node(s) "+strings.Join(created, ", ")+" (never opened, removed)", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error from mknod for "+strings.Join(unknown, ", "), e)
	}
	return blocked("mknod of a device node was refused", e)
}

// kallsymsBound bounds how much of /proc/kallsyms is read.
const kallsymsBound = 1 << 20

// hostKallsyms reads the start of /proc/kallsyms and counts symbols whose
// address is not zero. The kernel shows real addresses only to a reader it
// trusts (CAP_SYSLOG, or perf access under kptr_restrict 0): they defeat
// KASLR for a kernel exploit. The addresses are never put in the evidence.
func hostKallsyms(_ context.Context, _ probes.Params) probes.Result {
	const path = "/proc/kallsyms"
	e := ev{}
	f, err := os.Open(path)
	if err != nil {
		errno, _ := errnoOf(err)
		e.set("open", errnoLabel(errno))
		switch errno {
		case unix.ENOENT, unix.EACCES, unix.EPERM:
			return blocked(path+" cannot be opened", e)
		}
		return inconclusive("unexpected error opening "+path, e)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, kallsymsBound))
	lines, nonzero := 0, 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		lines++
		if strings.Trim(fields[0], "0") != "" {
			nonzero++
		}
	}
	e.setInt("symbols_read", lines)
	e.setInt("nonzero_addresses", nonzero)
	if err := sc.Err(); err != nil && lines == 0 {
		e.setErr("read_", err)
		return inconclusive("could not read "+path, e)
	}
	switch {
	case nonzero > 0:
		return escaped(fmt.Sprintf("%d of %d kernel symbols show a real address", nonzero, lines), e)
	case lines == 0:
		return blocked(path+" lists no symbols", e)
	}
	return blocked(fmt.Sprintf("all %d kernel symbols read show address zero", lines), e)
}

// userSpaceKernel reports whether the box runs on gVisor's Sentry (see
// runtimeClass).
func userSpaceKernel() bool {
	class, _ := runtimeClass(readRuntimeFacts())
	return class == "gvisor"
}
