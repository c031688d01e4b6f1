package impl

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"syscalls.bpf":             sysBPF,
		"syscalls.perf-event-open": sysPerfEventOpen,
		"syscalls.keyctl":          sysKeyctl,
		"syscalls.userfaultfd":     sysUserfaultfd,
		"syscalls.unshare":         sysUnshare,
		"syscalls.mount":           sysMount,
		"syscalls.io-uring-setup":  sysIOUringSetup,
		"syscalls.personality":     sysPersonality,
	})
}

// Each syscall probe calls the syscall once with arguments that fail
// harmlessly when the call is allowed, so the errno tells where it stopped:
// EPERM/EACCES (seccomp's usual answer, or an LSM or capability check) and
// ENOSYS (seccomp's other answer, or a kernel such as gVisor without the call)
// mean the kernel code was not reached; anything else, success included, means
// it was. Docker's default seccomp profile (moby/profiles/seccomp) is the
// public reference: it denies all of these (personality only for unusual
// personas); io_uring_setup is denied by the current profile but allowed by
// older Docker releases, 20.10 included.

// sysOutcome classifies one syscall result.
func sysOutcome(errno unix.Errno) probes.Outcome {
	switch errno {
	case unix.EPERM, unix.EACCES, unix.ENOSYS:
		return probes.Blocked
	}
	return probes.Escaped
}

// sysctlNotes records host sysctls that decide the result whatever the
// sandbox does: a kernel-wide "disabled" setting answers EPERM to everyone, so
// a weak sandbox on such a host reports blocked for a reason of the host's.
func sysctlNotes(e ev, paths ...string) {
	for _, p := range paths {
		if v := firstLine(p); v != "" {
			e.set("sysctl."+strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", "."), v)
		}
	}
}

// kernelRelease is uname's release and version. It tells the grader which
// kernel answered: the host's under runc, gVisor's Sentry (which reports
// 4.4.0) under runsc, where a call that "reached the kernel code" reached an
// emulation rather than the host kernel.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}

// syscallResult builds the result of one try; release closes what a
// surprising success created (a file descriptor).
func syscallResult(name string, r uintptr, errno unix.Errno, release func(uintptr), e ev) probes.Result {
	if k := kernelRelease(); k != "" {
		e.set("kernel", k)
	}
	if errno == 0 {
		e.set("result", fmt.Sprintf("success (%d)", r))
		if release != nil {
			release(r)
		}
	} else {
		e.set("errno", errnoLabel(errno))
	}
	if sysOutcome(errno) == probes.Blocked {
		return blocked(fmt.Sprintf("%s was refused with %s before reaching the kernel code", name, unix.ErrnoName(errno)), e)
	}
	if errno == 0 {
		return escaped(name+" succeeded", e)
	}
	return escaped(fmt.Sprintf("%s reached the kernel code (it answered %s, not EPERM or ENOSYS)", name, unix.ErrnoName(errno)), e)
}

func closeFD(r uintptr) { unix.Close(int(r)) }

// bpfInvalidCmd is no bpf command: an allowed call fails with EINVAL after
// the kernel's own permission check (kernel.unprivileged_bpf_disabled).
const bpfInvalidCmd = 0x7fff

func sysBPF(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	sysctlNotes(e, "/proc/sys/kernel/unprivileged_bpf_disabled")
	r, _, errno := unix.Syscall(unix.SYS_BPF, bpfInvalidCmd, 0, 0)
	return syscallResult("bpf", r, errno, closeFD, e)
}

// sysPerfEventOpen passes a NULL attribute: an allowed call fails with
// EFAULT copying it, before any event exists.
func sysPerfEventOpen(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	sysctlNotes(e, "/proc/sys/kernel/perf_event_paranoid")
	minusOne := ^uintptr(0)
	r, _, errno := unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, minusOne, minusOne, 0, 0)
	return syscallResult("perf_event_open", r, errno, closeFD, e)
}

// keyctlInvalidOp is no keyctl operation: an allowed call fails with
// EOPNOTSUPP.
const keyctlInvalidOp = 0xffff

func sysKeyctl(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	r, _, errno := unix.Syscall6(unix.SYS_KEYCTL, keyctlInvalidOp, 0, 0, 0, 0, 0)
	return syscallResult("keyctl", r, errno, nil, e)
}

// uffdFlags asks for user-mode-only faults (which passes the kernel's own
// permission check, vm.unprivileged_userfaultfd, on 5.11+) plus a bit no
// kernel knows, so an allowed call fails with EINVAL and creates nothing.
const uffdFlags = 1 | 1<<30

func sysUserfaultfd(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	sysctlNotes(e, "/proc/sys/vm/unprivileged_userfaultfd")
	r, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, uffdFlags, 0, 0)
	return syscallResult("userfaultfd", r, errno, closeFD, e)
}

// sysUnshare calls unshare(0), which changes nothing when allowed.
func sysUnshare(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	r, _, errno := unix.Syscall(unix.SYS_UNSHARE, 0, 0, 0)
	return syscallResult("unshare", r, errno, nil, e)
}

// sysMount mounts onto a path that does not exist: the kernel looks the
// target up before its capability check, so an allowed call fails ENOENT.
func sysMount(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	target := fmt.Sprintf("/.sandcheck-nonexistent-%d-%s/target", os.Getpid(), fileSafe(p.Token))
	e.set("target", target)
	err := unix.Mount("none", target, "tmpfs", unix.MS_RDONLY, "")
	errno, _ := errnoOf(err)
	release := func(uintptr) { unix.Unmount(target, unix.MNT_DETACH) }
	return syscallResult("mount", 0, errno, release, e)
}

// sysIOUringSetup passes zero entries and a NULL parameter block: an allowed
// call fails with EFAULT or EINVAL. kernel.io_uring_disabled=2 makes the
// kernel itself answer EPERM.
func sysIOUringSetup(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	sysctlNotes(e, "/proc/sys/kernel/io_uring_disabled", "/proc/sys/kernel/io_uring_group")
	r, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
	return syscallResult("io_uring_setup", r, errno, closeFD, e)
}

const (
	personaQuery    = 0xffffffff
	readImpliesExec = 0x0400000
)

// sysPersonality queries the persona, asks for READ_IMPLIES_EXEC on top of it
// and, if that worked, restores it at once. Unlike the other syscall probes
// the request here is real, not a harmless invalid one, so the outcome is
// whether the persona changed: success is the escape and any errno is a
// refusal (gVisor, for one, answers EINVAL to personas it does not support).
// A kernel that cannot answer the 0xffffffff query (gVisor again) is assumed
// to run the default PER_LINUX persona (0), which every process starts with.
//
// The persona belongs to one thread, so the goroutine stays on its thread
// throughout; if the restore failed the thread is left locked, and Go ends a
// locked thread when its goroutine exits, so the changed persona dies with it.
func sysPersonality(_ context.Context, _ probes.Params) probes.Result {
	e := ev{"kernel": kernelRelease()}
	runtime.LockOSThread()
	cur, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, personaQuery, 0, 0)
	if errno != 0 {
		e.set("query_errno", errnoLabel(errno))
		if sysOutcome(errno) == probes.Blocked {
			runtime.UnlockOSThread()
			return blocked(fmt.Sprintf("personality was refused with %s", unix.ErrnoName(errno)), e)
		}
		cur = 0
	}
	e.set("persona", fmt.Sprintf("0x%x", cur))
	if cur&readImpliesExec != 0 {
		e.set("read_implies_exec", "already set")
	}
	_, _, errno = unix.RawSyscall(unix.SYS_PERSONALITY, cur|readImpliesExec, 0, 0)
	if errno != 0 {
		runtime.UnlockOSThread()
		e.set("errno", errnoLabel(errno))
		return blocked(fmt.Sprintf("setting READ_IMPLIES_EXEC was refused with %s", unix.ErrnoName(errno)), e)
	}
	if _, _, rerr := unix.RawSyscall(unix.SYS_PERSONALITY, cur, 0, 0); rerr != 0 {
		e.set("restore_errno", errnoLabel(rerr))
	} else {
		e.set("restored", "true")
		runtime.UnlockOSThread()
	}
	return escaped("the box could set the READ_IMPLIES_EXEC persona", e)
}

// fileSafe keeps the characters of s that are safe in a file name.
func fileSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return -1
	}, s)
	s = strings.TrimLeft(s, ".")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
