package impl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// More of the privilege family: whether root in the box is root on the host,
// whether a setuid-root binary still raises privileges, whether the box can
// trace a process that asked not to be traced, and the LSM confinement state.
//
// Left out on purpose (PROBES.md names them; see the report of issue 4):
//   - privilege.wx-memory: nothing on this host refuses a writable and
//     executable mapping (no SELinux execmem, no PaX; Docker's seccomp
//     profile does not filter mmap/mprotect flags), so the hardened
//     reference would have to report escaped.
//   - privilege.aslr: kernel.randomize_va_space is host-wide (2 here, on
//     every target alike); the box's own lever, personality(ADDR_NO_RANDOMIZE),
//     is cleared by the kernel on a setuid exec, so it crosses no privilege
//     boundary, and the persona filter is already syscalls.personality.
//   - privilege.kernel-cve-range: this kernel (6.18) lies outside the ranges
//     of the known container escapes (Dirty Pipe 5.8-5.16.10, Dirty COW <4.8.3),
//     so the weak reference could not escape; whether the kernel is shared
//     is fingerprint.runtime's fact.
//   - Yama ptrace_scope: this kernel has no Yama; privilege.ptrace-other
//     reports its absence in the evidence.

func init() {
	register(map[string]Func{
		"privilege.uid0-host-mapped": privUID0HostMapped,
		"privilege.setuid-binaries":  privSetuidBinaries,
		"privilege.ptrace-other":     privPtraceOther,
		"privilege.lsm":              privLSM,
	})
	childKinds["euid"] = childEuid
	childKinds["target"] = childTarget
	childKinds["seize"] = childSeize
}

// idMapping is one line of /proc/<pid>/uid_map.
type idMapping struct{ inside, outside, count uint64 }

// parseIDMap reads uid_map lines strictly; a malformed line is an error.
func parseIDMap(r io.Reader) ([]idMapping, error) {
	var out []idMapping
	sc := bufio.NewScanner(io.LimitReader(r, 16<<10))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("uid_map line %q: want three numbers", sc.Text())
		}
		var m idMapping
		var err error
		for i, p := range []*uint64{&m.inside, &m.outside, &m.count} {
			if *p, err = strconv.ParseUint(f[i], 10, 32); err != nil {
				return nil, fmt.Errorf("uid_map line %q: %w", sc.Text(), err)
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// mapToHost returns the outer id of id, false if the map does not hold it.
func mapToHost(ms []idMapping, id uint64) (uint64, bool) {
	for _, m := range ms {
		if id >= m.inside && id-m.inside < m.count {
			return m.outside + (id - m.inside), true
		}
	}
	return 0, false
}

// privUID0HostMapped reads /proc/self/uid_map and maps the workload's
// effective uid to the parent user namespace's. Escaped when the workload is
// uid 0 of the host: root in the box is then root on the host for every file,
// device and kernel check that is not namespaced.
func privUID0HostMapped(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	euid := uint64(unix.Geteuid())
	e.setInt("euid", int(euid))
	f, err := os.Open("/proc/self/uid_map")
	if err != nil {
		e.setErr("open_", err)
		return inconclusive("/proc/self/uid_map could not be read", e)
	}
	defer f.Close()
	ms, err := parseIDMap(f)
	if err != nil || len(ms) == 0 {
		if err != nil {
			e.setErr("parse_", err)
		}
		return inconclusive("/proc/self/uid_map could not be parsed", e)
	}
	lines := make([]string, len(ms))
	for i, m := range ms {
		lines[i] = fmt.Sprintf("%d %d %d", m.inside, m.outside, m.count)
	}
	e.setList("uid_map", lines)
	host, ok := mapToHost(ms, euid)
	if !ok {
		return inconclusive(fmt.Sprintf("uid %d is not in the box's uid_map", euid), e)
	}
	e.setf("host_uid", "%d", host)
	initial := len(ms) == 1 && ms[0].inside == 0 && ms[0].outside == 0 && ms[0].count == 4294967295
	e.set("initial_user_namespace", strconv.FormatBool(initial))
	if host == 0 {
		return escaped(fmt.Sprintf("the workload's uid %d is uid 0 on the host (no user namespace remaps it)", euid), e)
	}
	return blocked(fmt.Sprintf("the workload's uid %d is uid %d on the host, not root", euid, host), e)
}

// childEuid reports the real and effective uid on the report descriptor. It
// is what the setuid canary runs.
func childEuid(args []string) int {
	if len(args) != 0 {
		return 2
	}
	out := os.NewFile(childFD, "report")
	fmt.Fprintf(out, "ruid %d euid %d\n", unix.Getuid(), unix.Geteuid())
	return 0
}

// setuidDirs are the folders searched for setuid-root binaries (evidence).
var setuidDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// setuidScanMax bounds the entries looked at in setuidDirs.
const setuidScanMax = 4096

// unprivilegedID is who the probe becomes, when it runs as root, to try the
// setuid canary.
const unprivilegedID = 65534

// privSetuidBinaries runs the harness's setuid-root canary (a copy of the
// probe binary that only reports its uids) as a non-root user and checks
// whether it gains euid 0. no_new_privs, a nosuid mount or a user namespace
// that does not map root each stop it. The setuid-root binaries of the
// image's usual folders are listed as evidence.
func privSetuidBinaries(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	var found []string
	seen := 0
	for _, d := range setuidDirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, de := range ents {
			if seen++; seen > setuidScanMax {
				break
			}
			var st unix.Stat_t
			if !de.Type().IsRegular() || unix.Lstat(filepath.Join(d, de.Name()), &st) != nil {
				continue
			}
			if st.Mode&unix.S_ISUID != 0 && st.Uid == 0 {
				found = append(found, filepath.Join(d, de.Name()))
			}
		}
	}
	e.setInt("image_setuid_root_binaries", len(found))
	if len(found) > 0 {
		e.setList("image_setuid_root", found)
	}
	if st, err := readStatus(); err == nil {
		e.set("no_new_privs", st["NoNewPrivs"])
	}
	canary := filepath.Join(p.ProbeDir, probes.SuidCanary)
	var st unix.Stat_t
	if err := unix.Lstat(canary, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&unix.S_ISUID == 0 || (st.Uid != 0 && !unmappedOwner(st.Uid)) {
		e.set("canary", "missing or not setuid root")
		return inconclusive("the harness's setuid-root canary is not in the probe folder", e)
	}
	if st.Uid != 0 {
		// The host's root, the canary's owner, is not mapped in the box's
		// user namespace: the kernel ignores the setuid bit of a file whose
		// owner it cannot map, which running it shows.
		e.setInt("canary_owner", int(st.Uid))
		e.set("canary_owner_unmapped", "true")
	}
	e.set("canary_mount", mountStateOf(canary))
	cmd := exec.CommandContext(ctx, canary, "child", "euid")
	cmd.Env = childEnv()
	if unix.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivilegedID, Gid: unprivilegedID, Groups: []uint32{}}}
		e.setInt("ran_as", unprivilegedID)
	} else {
		e.setInt("ran_as", unix.Geteuid())
	}
	line, err := childReport(ctx, cmd)
	if err != nil {
		n, isErrno := errnoOf(err)
		if isErrno && (n == unix.EACCES || n == unix.EPERM) {
			e.set("exec", errnoLabel(n))
			return blocked("the setuid canary could not be run (noexec mount or permissions)", e)
		}
		e.setErr("run_", err)
		return inconclusive("the setuid canary did not report", e)
	}
	e.set("canary_report", clip(line, 64))
	var ruid, euid int
	if _, err := fmt.Sscanf(line, "ruid %d euid %d", &ruid, &euid); err != nil {
		return inconclusive("the setuid canary's report could not be parsed", e)
	}
	if euid == 0 && ruid != 0 {
		return escaped(fmt.Sprintf("a setuid-root binary run by uid %d gained euid 0: no no_new_privs, no nosuid mount", ruid), e)
	}
	return blocked(fmt.Sprintf("the setuid-root binary kept euid %d (no_new_privs, a nosuid mount or a user namespace that does not map its owner ignore the setuid bit)", euid), e)
}

// unmappedOwner reports whether uid is the kernel's overflow uid, the
// owner a file shows in a user namespace that does not map its owner.
func unmappedOwner(uid uint32) bool {
	b, err := readProcFile("/proc/sys/kernel/overflowuid")
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && n >= 0 && uint32(n) == uid
}

// childReport starts cmd with a pipe on the report descriptor and returns the
// first line it writes there, bounded, then waits for it.
func childReport(ctx context.Context, cmd *exec.Cmd) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("making the report pipe: %w", err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", pe.Err
		}
		return "", err
	}
	line, rerr := bufio.NewReader(io.LimitReader(r, 256)).ReadString('\n')
	werr := cmd.Wait()
	if rerr != nil {
		if werr != nil {
			return "", fmt.Errorf("child exited without a report: %w", werr)
		}
		return "", fmt.Errorf("reading the child's report: %w", rerr)
	}
	return strings.TrimSpace(line), nil
}

// childTarget is a process to trace: with "nondumpable" it first clears its
// dumpable flag (as ssh-agent, gpg-agent and setuid programs do), so only a
// tracer holding CAP_SYS_PTRACE may attach. It reports "ready" and waits at
// most the given seconds (its parent kills it sooner).
func childTarget(args []string) int {
	if len(args) != 2 {
		return 2
	}
	secs, err := strconv.Atoi(args[1])
	if err != nil || secs <= 0 || secs > 60 {
		return 2
	}
	if args[0] == "nondumpable" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return 3
		}
	}
	out := os.NewFile(childFD, "report")
	fmt.Fprintln(out, "ready")
	out.Close()
	time.Sleep(time.Duration(secs) * time.Second)
	return 0
}

// childSeize tries PTRACE_SEIZE on a pid (no stop, no signal to the tracee)
// and reports "ok" or the errno; exiting detaches.
func childSeize(args []string) int {
	if len(args) != 1 {
		return 2
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid <= 1 {
		return 2
	}
	runtime.LockOSThread()
	out := os.NewFile(childFD, "report")
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		fmt.Fprintf(out, "err %s\n", unix.ErrnoName(errno))
		return 0
	}
	fmt.Fprintln(out, "ok")
	return 0
}

// ptraceTargetLife bounds each target process.
const ptraceTargetLife = 10

// privPtraceOther starts two target processes and, from a third process that
// is their sibling (not their ancestor), tries PTRACE_SEIZE on each. The
// outcome rests on the non-dumpable target, which the kernel lets only a
// tracer with CAP_SYS_PTRACE attach to; the dumpable one (same user) is
// evidence of what a same-user tracer can do where no Yama ptrace_scope
// restricts it.
func privPtraceOther(ctx context.Context, _ probes.Params) probes.Result {
	e := ev{}
	if v := firstLine("/proc/sys/kernel/yama/ptrace_scope"); v != "" {
		e.set("yama_ptrace_scope", v)
	} else {
		e.set("yama_ptrace_scope", "absent")
	}
	results := map[string]string{}
	for _, kind := range []string{"nondumpable", "dumpable"} {
		res, err := seizeSibling(ctx, kind)
		if err != nil {
			e.setErr(kind+"_", err)
			if kind == "nondumpable" {
				return inconclusive("the trace attempt on a non-dumpable sibling could not be made", e)
			}
			continue
		}
		results[kind] = res
		e.set(kind+"_sibling", res)
	}
	switch r := results["nondumpable"]; {
	case r == "ok":
		return escaped("attached (PTRACE_SEIZE) to a non-dumpable sibling process: the box holds CAP_SYS_PTRACE and no seccomp rule stops ptrace", e)
	case r == "err EPERM" || r == "err EACCES" || r == "err ENOSYS":
		return blocked("attaching to a non-dumpable sibling process was refused ("+strings.TrimPrefix(r, "err ")+")", e)
	}
	return inconclusive("unexpected answer attaching to a non-dumpable sibling: "+clip(results["nondumpable"], 40), e)
}

// seizeSibling runs one target and one tracer as children of the probe and
// returns the tracer's report.
func seizeSibling(ctx context.Context, kind string) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, ptraceTargetLife*time.Second)
	defer cancel()
	target := exec.CommandContext(tctx, selfExe, "child", "target", kind, strconv.Itoa(ptraceTargetLife))
	target.Env = childEnv()
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("making the report pipe: %w", err)
	}
	defer r.Close()
	target.ExtraFiles = []*os.File{w}
	if err := target.Start(); err != nil {
		w.Close()
		return "", fmt.Errorf("starting the target: %w", err)
	}
	w.Close()
	defer func() {
		_ = target.Process.Kill()
		_ = target.Wait()
	}()
	ready, err := bufio.NewReader(io.LimitReader(r, 64)).ReadString('\n')
	if err != nil || strings.TrimSpace(ready) != "ready" {
		return "", fmt.Errorf("the target did not get ready: %q %v", ready, err)
	}
	tracer := exec.CommandContext(tctx, selfExe, "child", "seize", strconv.Itoa(target.Process.Pid))
	tracer.Env = childEnv()
	return childReport(tctx, tracer)
}

// lsmFiles say which LSM confines the workload.
var lsmFiles = []string{"/proc/self/attr/current", "/proc/self/attr/apparmor/current", "/sys/kernel/security/lsm"}

// privLSM reports the LSM confinement state (informational: on a host with
// no LSM loaded no target can be confined, so there is no control to prove).
func privLSM(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	var labels []string
	for _, f := range lsmFiles {
		v := firstLine(f)
		if v == "" {
			v = "absent or empty"
		} else {
			labels = append(labels, f+"="+v)
		}
		e.set(pathKey(f), clip(strings.TrimRight(v, "\x00"), 120))
	}
	state := "no LSM label: unconfined, or no LSM loaded"
	for _, l := range labels {
		if !strings.Contains(l, "unconfined") && !strings.HasPrefix(l, "/sys/") {
			state = "confined: " + l
			break
		}
	}
	e.set("state", state)
	return result(probes.NotApplicable, "LSM confinement: "+state, e)
}
