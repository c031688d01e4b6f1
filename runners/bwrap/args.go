package bwrap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

// The file descriptors handed to the host-side command chain.
const (
	fdInfo    = 3 // bwrap --info-fd (start only)
	fdSeccomp = 4 // bwrap --seccomp
	fdNet     = 5 // the harness network namespace, for nsenter --net
	fdBlock   = 6 // bwrap --block-fd (start only): the go-ahead to run argv
)

// writeState makes the sandbox's state folder: its /etc (hosts,
// resolv.conf, passwd, group, hostname) and its compiled seccomp program.
func (sb *Sandbox) writeState() error {
	etc := filepath.Join(sb.state, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("creating the sandbox's state folder: %w", err)
	}
	if err := os.Chmod(sb.state, 0o755); err != nil {
		return fmt.Errorf("creating the sandbox's state folder: %w", err)
	}
	if err := process.MarkOwner(sb.state); err != nil {
		return err
	}
	r := sb.r
	host := sb.spec.Hostname
	if host == "" {
		host = "sandbox"
	}
	var resolv strings.Builder
	for _, d := range sb.spec.DNS {
		fmt.Fprintf(&resolv, "nameserver %s\n", d)
	}
	files := map[string]string{
		"hosts":       "127.0.0.1 localhost\n127.0.1.1 " + host + "\n",
		"hostname":    host + "\n",
		"resolv.conf": resolv.String(),
		"passwd":      fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:/tmp:/bin/sh\n", r.uid, r.gid),
		"group":       fmt.Sprintf("root:x:0:\nnogroup:x:65534:\nsandbox:x:%d:\n", r.gid),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing the sandbox's /etc/%s: %w", name, err)
		}
	}
	if r.seccomp != nil {
		if err := os.WriteFile(filepath.Join(sb.state, "seccomp.bpf"), r.seccomp, 0o644); err != nil {
			return fmt.Errorf("writing the seccomp program: %w", err)
		}
	}
	return nil
}

// files opens what a command chain is handed: info and block at fdInfo and
// fdBlock, the seccomp program at fdSeccomp and the network namespace at
// fdNet (nil where absent).
func (sb *Sandbox) files(info, block *os.File) ([]*os.File, error) {
	extra := []*os.File{info, nil, nil, block}
	if sb.r.seccomp != nil {
		f, err := os.Open(filepath.Join(sb.state, "seccomp.bpf"))
		if err != nil {
			return nil, fmt.Errorf("opening the seccomp program: %w", err)
		}
		extra[fdSeccomp-3] = f
	}
	if sb.Net != nil {
		// A duplicate, so closing the child's copy leaves the namespace's.
		fd, err := dup(sb.Net.File())
		if err != nil {
			return nil, err
		}
		extra[fdNet-3] = fd
	}
	return extra, nil
}

func dup(f *os.File) (*os.File, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("duplicating %s: %w", f.Name(), err)
	}
	var nf *os.File
	var derr error
	err = raw.Control(func(fd uintptr) {
		nf, derr = os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("duplicating %s: %w", f.Name(), err)
	}
	return nf, nil
}

// startCommand is the host-side chain that starts the sandbox: a shell
// joins the cgroup, nsenter enters the harness network namespace (network
// harness), setpriv drops to the host user (unless root), bwrap builds the
// sandbox and runs argv. It returns the read end of bwrap's --info-fd and
// the write end of its --block-fd: bwrap's child, set up in the sandbox's
// namespaces, waits for a byte (or the end of the pipe) on it before it
// runs argv, so the host can pin what it was given before any code of the
// box runs.
func (sb *Sandbox) startCommand(argv []string) (*exec.Cmd, *os.File, *os.File, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("making the info pipe: %w", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, nil, nil, fmt.Errorf("making the block pipe: %w", err)
	}
	extra, err := sb.files(infoW, blockR)
	if err != nil {
		closeAll([]*os.File{infoR, infoW, blockR, blockW})
		return nil, nil, nil, err
	}
	r, cfg := sb.r, sb.r.cfg
	var a []string
	a = append(a, sb.common()...)
	for _, ns := range Namespaces {
		if cfg.Unshares(ns) {
			a = append(a, "--unshare-"+ns)
		}
	}
	if cfg.Unshares("user") {
		a = append(a, "--uid", strconv.Itoa(r.uid), "--gid", strconv.Itoa(r.gid))
	}
	if cfg.Unshares("uts") && sb.spec.Hostname != "" {
		a = append(a, "--hostname", sb.spec.Hostname)
	}
	a = append(a,
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--ro-bind", filepath.Join(sb.state, "etc"), "/etc",
		"--proc", "/proc", "--dev", "/dev")
	if cfg.SystemPaths == "masked" {
		m, files, err := maskArgs(3 + len(extra))
		if err != nil {
			closeAll(extra)
			infoR.Close()
			blockW.Close()
			return nil, nil, nil, err
		}
		a = append(a, m...)
		extra = append(extra, files...)
	}
	for i, t := range cfg.Tmpfs {
		if t.NrInodes > 0 {
			a = append(a, "--bind", sb.tmpfsPath(i), t.Path)
			continue
		}
		n, err := targets.ParseSize(t.Size)
		if err != nil {
			closeAll(extra)
			infoR.Close()
			blockW.Close()
			return nil, nil, nil, err
		}
		a = append(a, "--size", strconv.FormatInt(n, 10), "--tmpfs", t.Path)
	}
	// Binds come from the host mounts mountBinds made under the state
	// folder, which the host user can reach.
	for i, m := range sb.binds {
		flag := "--bind"
		if m.ReadOnly {
			flag = "--ro-bind"
		}
		a = append(a, flag, sb.bindPath(i), m.Target)
	}
	if cfg.ReadOnlyRoot {
		a = append(a, "--remount-ro", "/")
	}
	a = append(a, "--info-fd", strconv.Itoa(fdInfo), "--block-fd", strconv.Itoa(fdBlock))
	a = append(a, "--")
	a = append(a, argv...)

	script := sb.Cgroup.JoinScript() + "exec "
	if sb.Net != nil {
		script += "nsenter --net=/proc/self/fd/" + strconv.Itoa(fdNet) + " -- "
	}
	script += prlimit(cfg.Limits)
	if !cfg.Root() {
		script += fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups -- ", r.hostUID, r.hostGID)
	}
	script += Binary + ` "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, a...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = extra
	return cmd, infoR, blockW, nil
}

// common are the bwrap options every bwrap of the sandbox gets: lifetime,
// session, seccomp, capabilities, environment, working folder.
func (sb *Sandbox) common() []string {
	cfg := sb.r.cfg
	var a []string
	if cfg.DieWithParent {
		a = append(a, "--die-with-parent")
	}
	if cfg.NewSession {
		a = append(a, "--new-session")
	}
	if sb.r.seccomp != nil {
		a = append(a, "--seccomp", strconv.Itoa(fdSeccomp))
	}
	for _, c := range cfg.CapDrop {
		a = append(a, "--cap-drop", capName(c))
	}
	for _, c := range cfg.CapAdd {
		a = append(a, "--cap-add", capName(c))
	}
	a = append(a, "--clearenv")
	for _, kv := range sb.env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return append(a, "--chdir", "/")
}

// mountBinds bind-mounts each bind source (the target's, then the probe
// folder) onto a folder of the state folder, as root on the host: an
// unprivileged bwrap could not reach a source under a folder only root may
// enter (the run's own folder), and bwrap resolves even a file descriptor
// by its path. The mounts are private (nothing propagates to or from them)
// and teardown unmounts them before removing the state folder.
func (sb *Sandbox) mountBinds() error {
	sb.binds = append(slices.Clone(sb.r.cfg.Binds), targets.Mount{Source: sb.spec.ProbeDir, Target: runners.ProbeMount, ReadOnly: true})
	for i, m := range sb.binds {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("bind source %q is not absolute (resolve it against the target file)", m.Source)
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("bind source: %w", err)
		}
		dst := sb.bindPath(i)
		if fi.IsDir() {
			err = os.MkdirAll(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("making the mount point of %s: %w", m.Source, err)
		}
		if err := unix.Mount(m.Source, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s: %w", m.Source, err)
		}
		sb.mounted = append(sb.mounted, dst)
		if err := unix.Mount("", dst, "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making the bind of %s private: %w", m.Source, err)
		}
	}
	return nil
}

// mountTmpfs mounts, on the host under the state folder, each tmpfs that
// caps its inodes (bwrap --tmpfs cannot): sized, inode-capped, owned by the
// host user bwrap runs as, private; startCommand binds it in.
func (sb *Sandbox) mountTmpfs() error {
	for i, t := range sb.r.cfg.Tmpfs {
		if t.NrInodes <= 0 {
			continue
		}
		n, err := targets.ParseSize(t.Size)
		if err != nil {
			return err
		}
		dst := sb.tmpfsPath(i)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("making the mount point of tmpfs %s: %w", t.Path, err)
		}
		opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", n, t.NrInodes, sb.r.hostUID, sb.r.hostGID)
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if !t.Exec {
			flags |= unix.MS_NOEXEC
		}
		if err := unix.Mount("tmpfs", dst, "tmpfs", flags, opts); err != nil {
			return fmt.Errorf("mounting tmpfs for %s: %w", t.Path, err)
		}
		sb.mounted = append(sb.mounted, dst)
		if err := unix.Mount("", dst, "", unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making the tmpfs for %s private: %w", t.Path, err)
		}
	}
	return nil
}

// tmpfsPath is where the runner mounts tmpfs i under the state folder.
func (sb *Sandbox) tmpfsPath(i int) string {
	return filepath.Join(sb.state, "tmpfs", strconv.Itoa(i))
}

// bindPath is where bind i is mounted under the state folder.
func (sb *Sandbox) bindPath(i int) string {
	return filepath.Join(sb.state, "binds", strconv.Itoa(i))
}

// unmountBinds detaches the bind mounts, in reverse order; it reports a
// mount it could not detach (the state folder must then stay).
func (sb *Sandbox) unmountBinds() error {
	var errs []error
	for i := len(sb.mounted) - 1; i >= 0; i-- {
		if err := unix.Unmount(sb.mounted[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", sb.mounted[i], err))
			continue
		}
		sb.mounted = slices.Delete(sb.mounted, i, i+1)
	}
	return errors.Join(errs...)
}

// prlimit is the command prefix that sets the per-process limits ("" when
// there are none).
func prlimit(l targets.Limits) string {
	if l.NoFile <= 0 {
		return ""
	}
	return fmt.Sprintf("prlimit --nofile=%d:%d -- ", l.NoFile, l.NoFile)
}

// maskedPaths are Docker's (runc's) masked /proc paths. The read-only ones
// (/proc/sys, sysrq-trigger, irq, bus) bwrap already binds read-only in
// every sandbox's /proc.
var maskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi"}

// maskArgs hide the masked /proc paths: a folder under an empty read-only
// tmpfs, a file under an empty read-only file bwrap makes in its own tmpfs
// (from an empty file descriptor, numbered from fd on, which it returns to
// hand over); paths this kernel lacks are left out.
func maskArgs(fd int) ([]string, []*os.File, error) {
	var a []string
	var files []*os.File
	for _, p := range maskedPaths {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--perms", "0555", "--tmpfs", p, "--remount-ro", p)
		default:
			f, err := os.Open(os.DevNull)
			if err != nil {
				closeAll(files)
				return nil, nil, fmt.Errorf("masking %s: %w", p, err)
			}
			a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(fd+len(files)), p)
			files = append(files, f)
		}
	}
	return a, files, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func capName(c string) string {
	if c == "ALL" {
		return c
	}
	return "CAP_" + c
}

// execCommand is the host-side chain of one exec: a shell joins the
// cgroup, nsenter enters every namespace and the root of the sandbox's
// first process as the sandbox's user, and a nested bwrap binds that root
// onto itself with the sandbox's seccomp filter, capabilities and session
// and runs argv.
func (sb *Sandbox) execCommand(argv []string) (*exec.Cmd, error) {
	extra, err := sb.files(nil, nil)
	if err != nil {
		return nil, err
	}
	r, cfg := sb.r, sb.r.cfg
	a := []string{"--dev-bind", "/", "/"}
	if cfg.Unshares("user") {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(r.uid), "--gid", strconv.Itoa(r.gid))
	}
	a = append(a, sb.common()...)
	a = append(a, "--")
	a = append(a, argv...)
	script := sb.Cgroup.JoinScript() + "exec " + prlimit(cfg.Limits) + fmt.Sprintf("nsenter -t %d --all -S %d -G %d --root --wd=/ -- %s \"$@\"",
		sb.childPID, r.uid, r.gid, Binary)
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, a...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = extra
	return cmd, nil
}
