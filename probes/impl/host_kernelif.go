package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Host devices and host-wide kernel interfaces. Devices are opened and closed
// again, never read or written; kernel control files are opened for writing
// and closed without a write. Each result says what let the open through or
// what refused it.
//
// Left out on purpose (PROBES.md names them; see the report of issue 4):
//   - host.dev-mem and host.dev-port: the kernel here is built without
//     CONFIG_DEVMEM and CONFIG_DEVPORT, so no /dev/mem or /dev/port exists
//     to pass into the weak reference; a probe could only ever say blocked.
//   - host.uevent-helper: built without CONFIG_UEVENT_HELPER, so
//     /sys/kernel/uevent_helper does not exist (host.sysrq-trigger still
//     tries it where it does).
//   - host.proc-unmasked stays one probe: of its four files only /proc/keys
//     and /proc/timer_list exist unmasked on this kernel (/proc/kcore and
//     /proc/sched_debug are absent), so two of four split IDs could never
//     escape; the per-file state is in its evidence.

func init() {
	register(map[string]Func{
		"host.dev-kmsg":      hostDevKmsg,
		"host.block-devices": hostBlockDevices,
		"host.core-pattern":  hostCorePattern,
		"host.release-agent": hostReleaseAgent,
	})
}

// openFlagsNoIO open a file without following a final link and without
// blocking; nothing is ever read or written through the descriptor.
const openFlagsNoIO = unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK

// hostDevKmsg opens /dev/kmsg for reading and closes it without reading. The
// kernel log is host-wide: a box that can open it reads the host's and every
// other box's kernel messages (and, opened for writing, could forge them).
func hostDevKmsg(_ context.Context, _ probes.Params) probes.Result {
	const path = "/dev/kmsg"
	e := ev{}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		n, _ := errnoOf(err)
		e.set("node", errnoLabel(n))
		if n == unix.ENOENT {
			return blocked(path+" is not in the box", e)
		}
		return inconclusive("unexpected error looking at "+path, e)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		e.setf("node", "char %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	} else {
		e.setf("node", "not a character device (mode %o)", st.Mode&unix.S_IFMT)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|openFlagsNoIO, 0)
	if err == nil {
		unix.Close(fd)
		e.set("open", "opened for reading, closed unread")
		return escaped(path+" opens: the host's kernel log is readable from the box (the device is present and the kernel's syslog check passed)", e)
	}
	n, _ := errnoOf(err)
	e.set("open", errnoLabel(n))
	switch n {
	case unix.EPERM, unix.EACCES, unix.ENOENT, unix.ENXIO, unix.ENODEV:
		return blocked(path+" is present but the open was refused (device cgroup, permissions or the kernel's syslog check)", e)
	}
	return inconclusive("unexpected error opening "+path, e)
}

// Bounds of the /dev scan.
const devScanMax = 4096

// hostBlockDevices lists /dev and its first-level folders for block device
// nodes (never following links), opens each read-only and closes it at once
// without reading. A block device that opens is a disk of the host (or, in
// the references, the harness's loop canary) within the box's reach.
func hostBlockDevices(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	var nodes []string
	seen := 0
	dirs := []string{"/dev"}
	for i := 0; i < len(dirs) && seen < devScanMax; i++ {
		ents, err := os.ReadDir(dirs[i])
		if err != nil {
			continue
		}
		for _, d := range ents {
			if seen++; seen > devScanMax {
				break
			}
			p := filepath.Join(dirs[i], d.Name())
			switch {
			case d.Type()&os.ModeDevice != 0 && d.Type()&os.ModeCharDevice == 0:
				nodes = append(nodes, p)
			case d.IsDir() && dirs[i] == "/dev" && d.Name() != "pts" && d.Name() != "shm" && d.Name() != "mqueue":
				dirs = append(dirs, p)
			}
		}
	}
	e.setInt("dev_entries_scanned", min(seen, devScanMax))
	e.setInt("block_nodes", len(nodes))
	if ents, err := os.ReadDir("/sys/dev/block"); err == nil {
		e.setInt("sys_dev_block_entries", len(ents))
	}
	var opened, rdevs, refused, unknown []string
	for _, p := range nodes {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
			continue
		}
		rdev := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		fd, err := unix.Open(p, unix.O_RDONLY|openFlagsNoIO, 0)
		if err == nil {
			unix.Close(fd)
			opened = append(opened, p+" ("+rdev+")")
			if !slices.Contains(rdevs, rdev) {
				rdevs = append(rdevs, rdev)
			}
			continue
		}
		n, _ := errnoOf(err)
		switch n {
		case unix.EPERM, unix.EACCES, unix.ENXIO, unix.ENODEV, unix.ENOENT, unix.ENOMEDIUM:
			refused = append(refused, p+" ("+rdev+"): "+errnoLabel(n))
		default:
			unknown = append(unknown, p+" ("+rdev+"): "+errnoLabel(n))
		}
	}
	if len(refused) > 0 {
		e.setList("refused", refused)
	}
	if len(unknown) > 0 {
		e.setList("unexpected", unknown)
	}
	if len(opened) > 0 {
		e.setList("opened", opened)
		e.set("opened_rdevs", strings.Join(rdevs, ","))
		return escaped(fmt.Sprintf("%d block device(s) open read-only from the box (closed unread): %s", len(opened), strings.Join(opened, ", ")), e)
	}
	if len(unknown) > 0 {
		return inconclusive("unexpected error opening a block device", e)
	}
	if len(nodes) == 0 {
		return blocked("no block device node in the box", e)
	}
	return blocked(fmt.Sprintf("all %d block device node(s) refused the open (device cgroup or permissions)", len(nodes)), e)
}

// hostCorePattern opens /proc/sys/kernel/core_pattern for writing and closes
// it without writing. core_pattern is host-wide; a "|program" written there
// runs as root on the host at the next crash of any process.
func hostCorePattern(_ context.Context, _ probes.Params) probes.Result {
	const path = "/proc/sys/kernel/core_pattern"
	e := ev{}
	e.setInt("euid", unix.Geteuid())
	if m := firstLine("/proc/self/uid_map"); m != "" {
		e.set("uid_map", m)
	}
	e.set("proc_sys_mount", mountStateOf("/proc/sys/kernel"))
	fd, err := unix.Open(path, unix.O_WRONLY|openFlagsNoIO, 0)
	if err == nil {
		unix.Close(fd)
		e.set("open", "opened for writing, closed unwritten")
		return escaped(path+" opens for writing: the box is root in the host's user namespace and /proc/sys is mounted read-write (no read-only system paths)", e)
	}
	n, _ := errnoOf(err)
	e.set("open", errnoLabel(n))
	switch n {
	case unix.EROFS:
		return blocked(path+" is on a read-only mount (the runtime's read-only /proc/sys)", e)
	case unix.EACCES, unix.EPERM:
		return blocked(path+" refused the write open: the box is not root in the host's user namespace", e)
	case unix.ENOENT:
		return blocked(path+" is absent (masked, or a kernel that does not offer it)", e)
	}
	return inconclusive("unexpected error opening "+path, e)
}

// mountStateOf describes the mount holding path from mountinfo: "<fstype>
// ro|rw at <target>", or "unknown".
func mountStateOf(path string) string {
	ms, err := readMountinfo()
	if err != nil {
		return "unknown"
	}
	best := -1
	for i, m := range ms {
		if underDir(path, m.Target) && (best < 0 || len(m.Target) >= len(ms[best].Target)) {
			best = i
		}
	}
	if best < 0 {
		return "unknown"
	}
	m := ms[best]
	mode := "rw"
	if m.ReadOnly() {
		mode = "ro"
	}
	return fmt.Sprintf("%s %s at %s", m.FSType, mode, m.Target)
}

// cgroupV1Controllers lists the enabled cgroup v1 controllers from
// /proc/cgroups, each alone in its hierarchy first (a hierarchy is mounted
// with exactly its controllers, or the mount fails with EBUSY).
func cgroupV1Controllers() []string {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return nil
	}
	defer f.Close()
	byHier := map[string][]string{}
	var order []string
	sc := bufio.NewScanner(io.LimitReader(f, 16<<10))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || strings.HasPrefix(fs[0], "#") || fs[1] == "0" || fs[3] != "1" {
			continue
		}
		if _, err := strconv.Atoi(fs[1]); err != nil {
			continue
		}
		if _, ok := byHier[fs[1]]; !ok {
			order = append(order, fs[1])
		}
		byHier[fs[1]] = append(byHier[fs[1]], fs[0])
	}
	var out []string
	for _, h := range order {
		out = append(out, strings.Join(byHier[h], ","))
	}
	return out
}

// releaseAgentMounts is how many hierarchies the probe tries to mount.
const releaseAgentMounts = 3

// hostReleaseAgent opens a cgroup v1 release_agent for writing and closes it
// without writing: first any the box already sees under /sys/fs/cgroup, then
// the one at the root of a v1 hierarchy it mounts itself in a private
// temporary folder (unmounted at once). release_agent names a program the
// host kernel runs as root when a cgroup empties: the classic escape.
func hostReleaseAgent(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if paths, _ := filepath.Glob("/sys/fs/cgroup/*/release_agent"); len(paths) > 0 {
		for _, path := range paths {
			if openForWrite(path) == nil {
				e.set("visible", path+" opened for writing")
				return escaped(path+" is visible and opens for writing (closed unwritten): the box sees a cgroup hierarchy's root read-write", e)
			}
		}
		e.setInt("visible_refused", len(paths))
	}
	ctrls := cgroupV1Controllers()
	if len(ctrls) == 0 {
		e.set("cgroup_v1", "no v1 controller enabled")
		return blocked("no cgroup v1 hierarchy to mount (release_agent exists only in cgroup v1)", e)
	}
	var dir string
	for _, d := range mknodDirs(p.ProbeDir) {
		if made, err := os.MkdirTemp(d, ".sandcheck-cgroup-"); err == nil {
			dir = made
			break
		}
	}
	if dir == "" {
		return inconclusive("no writable folder to mount a cgroup hierarchy in", e)
	}
	defer os.Remove(dir)
	var mountErrs []string
	for i, c := range ctrls {
		if i >= releaseAgentMounts {
			break
		}
		err := unix.Mount("cgroup", dir, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, c)
		if err != nil {
			n, _ := errnoOf(err)
			mountErrs = append(mountErrs, c+": "+errnoLabel(n))
			if n == unix.EPERM || n == unix.EACCES {
				break // the same answer for every controller
			}
			continue
		}
		openErr := openForWrite(filepath.Join(dir, "release_agent"))
		if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil {
			e.setErr("unmount_", uerr)
		}
		e.set("mounted", c)
		if openErr == nil {
			e.set("release_agent", "opened for writing, closed unwritten")
			return escaped(fmt.Sprintf("mounted the cgroup v1 %s hierarchy and opened its release_agent for writing (closed unwritten): the box holds CAP_SYS_ADMIN with no seccomp or LSM rule against mount", c), e)
		}
		n, _ := errnoOf(openErr)
		e.set("release_agent", errnoLabel(n))
		return blocked(fmt.Sprintf("mounted the cgroup v1 %s hierarchy, but its release_agent refused the write open", c), e)
	}
	e.setList("mount", mountErrs)
	return blocked("mounting a cgroup v1 hierarchy was refused (no CAP_SYS_ADMIN, or seccomp or the LSM forbid mount)", e)
}

// openForWrite opens path write-only and closes it without writing.
func openForWrite(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|openFlagsNoIO, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}
