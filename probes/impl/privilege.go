package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"privilege.root-uid":       rootUID,
		"privilege.dangerous-caps": dangerousCaps,
		"privilege.no-new-privs":   noNewPrivs,
		"privilege.seccomp":        seccompMode,
		"privilege.userns-create":  usernsCreate,
		"privilege.mount-fs":       mountFS,
	})
}

// readStatus reads /proc/self/status into a map of its "Key:\tvalue" lines.
func readStatus() (map[string]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("opening /proc/self/status: %w", err)
	}
	defer f.Close()
	return parseStatus(io.LimitReader(f, 64<<10)), nil
}

func parseStatus(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// firstLine reads the first line of a small file, spaces collapsed.
func firstLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 256))
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.Join(strings.Fields(line), " ")
}

// rootUID checks the effective uid. uid_map tells whether uid 0 in the box is
// uid 0 on the host ("0 0 4294967295" is the initial user namespace).
func rootUID(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	euid := unix.Geteuid()
	e.setInt("uid", unix.Getuid())
	e.setInt("euid", euid)
	e.setInt("gid", unix.Getgid())
	m := firstLine("/proc/self/uid_map")
	if m != "" {
		e.set("uid_map", m)
	}
	if euid != 0 {
		return blocked(fmt.Sprintf("the workload runs as uid %d", euid), e)
	}
	if strings.HasPrefix(m, "0 0 ") {
		return escaped("the workload runs as uid 0, which is uid 0 on the host", e)
	}
	return escaped("the workload runs as uid 0", e)
}

// capNames are the capability numbers of linux/capability.h.
var capNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// dangerousCapSet are the capabilities an agent sandbox must not hold. The
// remediation is "drop ALL, add back what a task needs", so the list is broad;
// it leaves out only capabilities whose reach stays inside the box (CHOWN,
// FSETID, KILL, NET_BIND_SERVICE, AUDIT_WRITE, SYS_CHROOT, LEASE, IPC_OWNER,
// SYS_NICE, SYS_TTY_CONFIG, NET_BROADCAST, AUDIT_READ, LINUX_IMMUTABLE, IPC_LOCK).
// Docker's default set therefore counts as dangerous (DAC_OVERRIDE, FOWNER,
// MKNOD, NET_RAW, SETUID, SETGID, SETFCAP, SETPCAP): each is a step in a known
// escape or privilege regain.
var dangerousCapSet = map[string]string{
	// Reach into the shared kernel or host-wide state.
	"SYS_ADMIN":          "mount, namespaces, most escapes",
	"SYS_MODULE":         "load kernel code",
	"SYS_RAWIO":          "raw I/O ports, /dev/mem, /proc/kcore",
	"SYS_BOOT":           "reboot, kexec",
	"SYS_TIME":           "set the host clock (not namespaced)",
	"SYSLOG":             "kernel log and kernel addresses",
	"BPF":                "load BPF programs",
	"PERFMON":            "perf events on the shared kernel",
	"SYS_PACCT":          "host-wide process accounting",
	"SYS_RESOURCE":       "override resource limits",
	"AUDIT_CONTROL":      "change host audit rules",
	"MAC_ADMIN":          "change LSM policy",
	"MAC_OVERRIDE":       "bypass LSM policy",
	"BLOCK_SUSPEND":      "keep the host awake",
	"WAKE_ALARM":         "wake the host",
	"CHECKPOINT_RESTORE": "choose pids, read other processes' state",
	// Container breakout primitives.
	"DAC_READ_SEARCH": "open_by_handle_at reads host files (shocker)",
	"SYS_PTRACE":      "trace and inject into other processes",
	"MKNOD":           "create device nodes (raw disks)",
	"NET_ADMIN":       "reconfigure the network, bypass egress rules",
	"NET_RAW":         "raw packets: spoofing, ARP/DNS poisoning on the bridge",
	// Bypass the permission model that keeps a mounted file or setuid binary safe.
	"DAC_OVERRIDE": "ignore file permissions",
	"FOWNER":       "ignore file ownership checks",
	"SETUID":       "become any uid",
	"SETGID":       "become any gid",
	"SETFCAP":      "grant file capabilities",
	"SETPCAP":      "change capability sets",
}

// capName names capability bit n; bits past the known list are named by
// number and counted dangerous: a kernel newer than this list granted
// something nobody vetted.
func capName(n int) string {
	if n < len(capNames) {
		return capNames[n]
	}
	return fmt.Sprintf("CAP_%d", n)
}

// dangerousIn lists the dangerous capabilities in a CapXxx hex mask.
func dangerousIn(hexMask string) ([]string, error) {
	mask, err := strconv.ParseUint(hexMask, 16, 64)
	if err != nil {
		return nil, fmt.Errorf("parsing capability mask %q: %w", hexMask, err)
	}
	var out []string
	for n := 0; n < 64; n++ {
		if mask&(1<<n) == 0 {
			continue
		}
		name := capName(n)
		if _, bad := dangerousCapSet[name]; bad || n >= len(capNames) {
			out = append(out, name)
		}
	}
	return out, nil
}

// dangerousCaps reads the effective and bounding sets. The bounding set
// matters as much as the effective one: it is what a setuid binary or a
// file capability can raise a process to.
func dangerousCaps(_ context.Context, _ probes.Params) probes.Result {
	st, err := readStatus()
	e := ev{}
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not read /proc/self/status", e)
	}
	var all []string // "CapEff: n"
	for _, f := range []string{"CapEff", "CapBnd"} {
		v, ok := st[f]
		if !ok {
			return inconclusive("/proc/self/status has no "+f, e)
		}
		e.set(strings.ToLower(f), v)
		bad, err := dangerousIn(v)
		if err != nil {
			e.setErr("", err)
			return inconclusive("could not parse "+f, e)
		}
		if len(bad) > 0 {
			e.setList(strings.ToLower(f)+"_dangerous", bad)
			all = append(all, fmt.Sprintf("%d in %s", len(bad), f))
		}
	}
	if len(all) > 0 {
		return escaped("dangerous capabilities held: "+strings.Join(all, ", "), e)
	}
	return blocked("no dangerous capability in the effective or bounding set", e)
}

// noNewPrivs asks the kernel for the no_new_privs bit.
func noNewPrivs(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		e.setErr("", err)
		return inconclusive("prctl(PR_GET_NO_NEW_PRIVS) failed", e)
	}
	e.setInt("no_new_privs", v)
	if v == 0 {
		return escaped("no_new_privs is off: a setuid binary can raise privileges", e)
	}
	return blocked("no_new_privs is set", e)
}

// seccompMode reads the Seccomp field of /proc/self/status: 0 none, 1 strict,
// 2 filter.
func seccompMode(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	st, err := readStatus()
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not read /proc/self/status", e)
	}
	mode, ok := st["Seccomp"]
	if !ok {
		return inconclusive("/proc/self/status has no Seccomp field", e)
	}
	e.set("seccomp", mode)
	if f, ok := st["Seccomp_filters"]; ok {
		e.set("seccomp_filters", f)
	}
	switch mode {
	case "0":
		return escaped("no seccomp filter: the whole syscall surface is reachable", e)
	case "1", "2":
		return blocked("a seccomp filter is applied", e)
	}
	return inconclusive("unknown seccomp mode", e)
}

// usernsCreate starts "child noop" in a new user namespace. Start succeeding
// is the escape; the child exits at once.
func usernsCreate(ctx context.Context, _ probes.Params) probes.Result {
	cmd := exec.CommandContext(ctx, selfExe, "child", "noop")
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	e := ev{}
	if err := cmd.Start(); err != nil {
		e.setErr("", err)
		n, _ := errnoOf(err)
		switch n {
		case unix.EPERM, unix.EACCES, unix.ENOSPC, unix.EUSERS, unix.ENOSYS, unix.EINVAL:
			// ENOSPC: user.max_user_namespaces is 0; EINVAL: no user
			// namespace support in the kernel.
			return blocked("creating a user namespace was refused", e)
		}
		return inconclusive("starting a child in a new user namespace failed unexpectedly", e)
	}
	if err := cmd.Wait(); err != nil {
		e.setErr("child_", err)
	}
	return escaped("a child process started in a new user namespace", e)
}

// mountFS mounts a 4 KiB tmpfs on a fresh empty directory of a writable
// scratch place and unmounts it at once.
func mountFS(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	dir, err := scratchDir("sandcheck-mnt-")
	if err != nil {
		e.setErr("", err)
		return inconclusive("no writable directory to mount on", e)
	}
	defer os.Remove(dir)
	e.set("dir", dir)
	err = unix.Mount("sandcheck", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0700")
	if err == nil {
		if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil {
			e.setErr("unmount_", uerr)
		}
		return escaped("mounted a tmpfs inside the box", e)
	}
	e.setErr("", err)
	switch err {
	case unix.EPERM, unix.EACCES, unix.ENOSYS:
		return blocked("mounting a filesystem was refused", e)
	}
	return inconclusive("mount failed with an unexpected error", e)
}

// scratchDir makes a fresh empty directory in the first writable scratch place.
func scratchDir(prefix string) (string, error) {
	var firstErr error
	for _, base := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm", os.Getenv("HOME")} {
		if base == "" {
			continue
		}
		d, err := os.MkdirTemp(base, prefix)
		if err == nil {
			return d, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return "", fmt.Errorf("making a scratch directory: %w", firstErr)
}
