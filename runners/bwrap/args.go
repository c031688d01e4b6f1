package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The file descriptors handed to the host-side command chain.
const (
	fdInfo    = 3 // bwrap --info-fd (start only)
	fdSeccomp = 4 // bwrap --seccomp
	fdNet     = 5 // the harness network namespace, for nsenter --net
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

// files opens what a command chain is handed: the seccomp program at
// fdSeccomp and the network namespace at fdNet (nil where absent).
func (sb *Sandbox) files(info *os.File) ([]*os.File, error) {
	extra := []*os.File{info, nil, nil}
	if sb.r.seccomp != nil {
		f, err := os.Open(filepath.Join(sb.state, "seccomp.bpf"))
		if err != nil {
			return nil, fmt.Errorf("opening the seccomp program: %w", err)
		}
		extra[fdSeccomp-3] = f
	}
	if sb.ns != nil {
		// A duplicate, so closing the child's copy leaves the namespace's.
		fd, err := dup(sb.ns.File())
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
// sandbox and runs argv. It returns the read end of bwrap's --info-fd.
func (sb *Sandbox) startCommand(argv []string) (*exec.Cmd, *os.File, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("making the info pipe: %w", err)
	}
	extra, err := sb.files(infoW)
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, nil, err
	}
	r, cfg := sb.r, sb.r.cfg
	var a []string
	a = append(a, sb.common()...)
	for _, ns := range targets.BwrapNamespaces {
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
	for _, t := range cfg.Tmpfs {
		n, err := targets.ParseSize(t.Size)
		if err != nil {
			return nil, nil, err
		}
		a = append(a, "--size", strconv.FormatInt(n, 10), "--tmpfs", t.Path)
	}
	for _, m := range cfg.Binds {
		src := m.Source
		if !filepath.IsAbs(src) {
			return nil, nil, fmt.Errorf("bind source %q is not absolute (resolve it against the target file)", src)
		}
		flag := "--bind"
		if m.ReadOnly {
			flag = "--ro-bind"
		}
		a = append(a, flag, src, m.Target)
	}
	a = append(a, "--ro-bind", sb.spec.ProbeDir, runners.ProbeMount, "--info-fd", strconv.Itoa(fdInfo))
	a = append(a, "--")
	a = append(a, argv...)

	script := sb.cg.JoinScript() + "exec "
	if sb.ns != nil {
		script += "nsenter --net=/proc/self/fd/" + strconv.Itoa(fdNet) + " -- "
	}
	if !cfg.Root() {
		script += fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups -- ", r.hostUID, r.hostGID)
	}
	script += Binary + ` "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, a...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = extra
	return cmd, infoR, nil
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
	extra, err := sb.files(nil)
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
	script := sb.cg.JoinScript() + fmt.Sprintf("exec nsenter -t %d --all -S %d -G %d --root --wd=/ -- %s \"$@\"",
		sb.childPID, r.uid, r.gid, Binary)
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, a...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = extra
	return cmd, nil
}
