package impl

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"host.bind-mounts":   bindMounts,
		"host.sysrq-trigger": sysrqTrigger,
		"host.proc-unmasked": procUnmasked,
	})
}

// bindMounts lists mounts of host-backed filesystems (see hostMounts) and
// whether each is writable. The harness's probe directory, the root
// filesystem, the runtime's /etc files and runtime-managed volumes are
// expected and left out (the last are listed as evidence), and so is the
// target's declared inputs folder when it is read-only: that is the
// platform handing the task its inputs (listed as evidence; a writable one
// counts).
func bindMounts(_ context.Context, p probes.Params) probes.Result {
	ms, err := readMountinfo()
	if err != nil {
		e := ev{}
		e.setErr("", err)
		return inconclusive("mountinfo could not be read", e)
	}
	e := ev{}
	var found []mount
	for _, m := range hostMounts(ms, p.ProbeDir) {
		if p.InputsDir != "" && m.Target == p.InputsDir && m.ReadOnly() {
			e.set("inputs_mount", fmt.Sprintf("%s (%s ro)", m.Target, m.FSType))
			continue
		}
		found = append(found, m)
	}
	e.setInt("mounts_total", len(ms))
	e.setInt("host_mounts", len(found))
	var managed []string
	for _, m := range ms {
		if managedVolume.MatchString(m.Root) {
			managed = append(managed, m.Target)
		}
	}
	if len(managed) > 0 {
		e.setList("managed_volumes", managed) // not counted; listed for the grader
	}
	if len(found) == 0 {
		return blocked("no mount of a host filesystem besides the root and the runtime's own files", e)
	}
	var items []string
	writable := 0
	for _, m := range found {
		mode := "ro"
		if !m.ReadOnly() {
			mode = "rw"
			writable++
		}
		items = append(items, fmt.Sprintf("%s (%s %s)", m.Target, m.FSType, mode))
	}
	e.setInt("writable", writable)
	e.setList("mounts", items)
	return escaped(fmt.Sprintf("%d host filesystem mount(s) in the box, %d writable", len(found), writable), e)
}

// kernelControlFiles are kernel interfaces that, written from a box sharing
// the host kernel, crash the host (sysrq) or run a program of the box's
// choosing as host root (core_pattern, uevent_helper). The probe only opens
// them for writing and closes them at once.
var kernelControlFiles = []string{
	"/proc/sysrq-trigger",
	"/proc/sys/kernel/core_pattern",
	"/sys/kernel/uevent_helper",
}

// refusedErrno reports errors that mean "the box may not": read-only mount,
// permission, no such file (masked or absent).
func refusedErrno(n unix.Errno) bool {
	return n == unix.EROFS || n == unix.EACCES || n == unix.EPERM || n == unix.ENOENT
}

// sysrqTrigger opens each kernel control file write-only and closes it without
// writing: the open is where a read-only or masked /proc refuses.
func sysrqTrigger(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	var opened, unknown []string
	for _, path := range kernelControlFiles {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
			opened = append(opened, path)
			e.set(pathKey(path), "opened for writing")
			continue
		}
		n, _ := err.(unix.Errno)
		e.set(pathKey(path), errnoLabel(n))
		if !refusedErrno(n) {
			unknown = append(unknown, path)
		}
	}
	switch {
	case len(opened) > 0:
		return escaped("writable kernel control file(s): "+strings.Join(opened, ", "), e)
	case len(unknown) > 0:
		return inconclusive("unexpected error opening "+strings.Join(unknown, ", "), e)
	}
	return blocked("no kernel control file could be opened for writing", e)
}

// maskedProcFiles leak host kernel state; runtimes mask them (docker binds
// /dev/null over them) or they do not exist (gVisor, newer kernels).
var maskedProcFiles = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"}

// procUnmasked reads a few bytes of each file. A file is masked if absent, if
// something other than procfs answers at its path (a /dev/null bind, a tmpfs),
// or if reading it is refused; it is unmasked if procfs itself gives bytes (or
// an empty read: the interface is open even if it has nothing to say yet).
func procUnmasked(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	var unmasked, unknown []string
	for _, path := range maskedProcFiles {
		state, open := procFileState(path)
		e.set(pathKey(path), state)
		switch open {
		case probes.Escaped:
			unmasked = append(unmasked, path)
		case probes.Inconclusive:
			unknown = append(unknown, path)
		}
	}
	switch {
	case len(unmasked) > 0:
		return escaped("unmasked: "+strings.Join(unmasked, ", "), e)
	case len(unknown) > 0:
		return inconclusive("could not tell whether masked: "+strings.Join(unknown, ", "), e)
	}
	return blocked("all sensitive /proc files are masked or absent", e)
}

// procFileState says what is at path: (description, Escaped if unmasked,
// Blocked if masked, Inconclusive if it cannot tell).
func procFileState(path string) (string, probes.Outcome) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		n, _ := err.(unix.Errno)
		switch n {
		case unix.ENOENT:
			return "absent", probes.Blocked
		case unix.EACCES, unix.EPERM:
			return "masked: open " + errnoLabel(n), probes.Blocked
		}
		return "open " + errnoLabel(n), probes.Inconclusive
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "fstat " + err.Error(), probes.Inconclusive
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Sprintf("masked: not a regular file (mode %o)", st.Mode&unix.S_IFMT), probes.Blocked
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return "fstatfs " + err.Error(), probes.Inconclusive
	}
	if sfs.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Sprintf("masked: covered by filesystem 0x%x", sfs.Type), probes.Blocked
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil {
		en, _ := err.(unix.Errno)
		if en == unix.EACCES || en == unix.EPERM {
			return "masked: read " + errnoLabel(en), probes.Blocked
		}
		return "read " + errnoLabel(en), probes.Inconclusive
	}
	return fmt.Sprintf("readable procfs file (%d bytes read)", n), probes.Escaped
}

// pathKey turns an absolute path into an evidence key: /proc/keys -> proc.keys.
func pathKey(path string) string {
	return cleanKey(strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "."))
}
