// Package bwrap is the bubblewrap runner (runner: bwrap): each sandbox is a
// bwrap sandbox (Debian's /usr/bin/bwrap) configured from the target's bwrap
// section: namespaces to unshare, binds, tmpfs scratch with sizes, a seccomp
// filter compiled from a Docker-format profile (see CompileProfile),
// capabilities dropped or added, --die-with-parent, --new-session, cgroup
// limits through a cgroup the runner makes (package process's Cgroup), and
// either no network (--unshare-net) or a network namespace on the harness
// bridge (netharness.Attach).
//
// The root file system is the host's /usr bound read-only (with /bin,
// /sbin, /lib and /lib64 as symbolic links into it, Debian 12's merged
// /usr), a fresh /proc, a minimal /dev, an /etc of the runner's own (hosts,
// resolv.conf naming the spec's DNS, passwd and group), the tmpfs mounts
// and binds the target declares and the probe folder read-only at
// runners.ProbeMount. Nothing else of the host is there. bwrap's /dev binds
// the host's null, zero, full, random, urandom and tty nodes in (an
// unprivileged bwrap cannot make device nodes). With read_only_root the
// root is made read-only once built; with system_paths masked, Docker's
// masked /proc paths are covered. Binds come from private bind mounts the
// runner makes, as root, under StateRoot: an unprivileged bwrap could not
// reach a source in a folder only root may enter.
//
// bwrap runs as the target's host_user: an unprivileged account (bwrap's
// intended use; the sandbox's user namespace maps to it), or root.
//
// Exec: bwrap cannot run a command in a running sandbox, so an exec enters
// every namespace of the sandbox's first process with nsenter (user, mount,
// PID, network, IPC, UTS, cgroup, its root) as the sandbox's user, and
// there starts a nested bwrap that binds the sandbox's / onto itself and
// applies the same seccomp filter, capabilities, --new-session and
// --die-with-parent. The command thus sees the sandbox's files (tmpfs
// scratch included), processes and network, in the sandbox's cgroup. The
// limits of this: it runs in a nested user namespace (mapping the same
// user) when the sandbox has one, in a mount namespace of its own (a copy
// of the sandbox's: mounts it makes are not seen by the rest), and it is
// not a descendant of the sandbox's first process. The engine's hardened
// targets launch tasks as the first process (Command with Waiter), which
// has none of these limits.
package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/internal/netns"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.Sandbox          = (*Sandbox)(nil)
	_ runners.Waiter           = (*Sandbox)(nil)
	_ runners.Inspector        = (*Sandbox)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
	_ runners.CPUMeter         = (*Sandbox)(nil)
)

// Binary is the bwrap the runner uses (Debian's bubblewrap package).
const Binary = "/usr/bin/bwrap"

// StateRoot holds each sandbox's own files (its /etc and seccomp program)
// while it runs.
const StateRoot = "/run/sandcheck-bwrap"

// idPrefix is the prefix of the bwrap sandboxes' IDs (process.NewID).
const idPrefix = "scbw"

// Bounds.
const (
	defaultStartTimeout = 60 * time.Second
)

// Runner starts bwrap sandboxes for one target. It is safe for concurrent
// use.
type Runner struct {
	cfg      Config
	seccomp  []byte // compiled program; nil when unconfined
	hostUID  int
	hostGID  int
	uid, gid int // inside the sandbox
	process.Base
}

// Option configures a Runner (process.Option: the two runners share their
// options).
type Option = process.Option

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return process.WithLogger(l) }

// WithDocker sets the engine client through which the harness network is
// looked up (network harness); the default makes one from the environment.
func WithDocker(c client.NetworkAPIClient) Option { return process.WithDocker(c) }

// New checks the configuration and compiles its seccomp profile. baseDir
// resolves a relative profile path (the target file's folder).
func New(cfg Config, baseDir string, opts ...Option) (*Runner, error) {
	r := &Runner{cfg: cfg}
	var err error
	if r.hostUID, r.hostGID, err = parseUser(cfg.HostUser); err != nil {
		return nil, fmt.Errorf("bwrap host_user: %w", err)
	}
	r.uid, r.gid = r.hostUID, r.hostGID
	if cfg.User != "" {
		if r.uid, r.gid, err = parseUser(cfg.User); err != nil {
			return nil, fmt.Errorf("bwrap user: %w", err)
		}
		if !cfg.Unshares("user") && (r.uid != r.hostUID || r.gid != r.hostGID) {
			return nil, errors.New("bwrap user differs from host_user but the user namespace is not unshared")
		}
	}
	if cfg.Network != "none" && cfg.Network != "harness" {
		return nil, fmt.Errorf("bwrap network %q is not none or harness", cfg.Network)
	}
	if cfg.Network == "harness" && cfg.Unshares("net") {
		return nil, errors.New("bwrap network harness: leave net out of unshare (the runner makes the network namespace)")
	}
	if cfg.Seccomp != "" && cfg.Seccomp != "unconfined" {
		p := cfg.Seccomp
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		if r.seccomp, err = CompileProfile(p, keptCaps(cfg)); err != nil {
			return nil, err
		}
	}
	r.Configure(opts)
	return r, nil
}

func parseUser(s string) (uid, gid int, err error) {
	u, g, hasG := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("%q is not uid[:gid]", s)
	}
	gid = uid
	if hasG {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("%q is not uid[:gid]", s)
		}
	}
	return uid, gid, nil
}

// allCaps are the capabilities Docker's profiles name, with the prefix.
var allCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

// keptCaps are the capabilities (CAP_ names) the configuration leaves the
// sandbox's user, for the seccomp profile's capability conditions. bwrap
// gives a sandbox whose user is not root no capabilities unless added.
func keptCaps(cfg Config) []string {
	var kept []string
	uid, _, err := parseUser(cfg.User)
	if cfg.User == "" {
		uid, _, err = parseUser(cfg.HostUser)
	}
	if err == nil && uid == 0 {
		kept = slices.Clone(allCaps)
	}
	for _, c := range cfg.CapDrop {
		if c == "ALL" {
			kept = nil
			continue
		}
		kept = slices.DeleteFunc(kept, func(k string) bool { return k == "CAP_"+c })
	}
	for _, c := range cfg.CapAdd {
		if c == "ALL" {
			kept = slices.Clone(allCaps)
			continue
		}
		if !slices.Contains(kept, "CAP_"+c) {
			kept = append(kept, "CAP_"+c)
		}
	}
	return kept
}

// Name identifies the backend.
func (r *Runner) Name() string { return "bwrap" }

// HostCPUClock is true: bwrap's tasks are host processes, their CPU clock
// the host kernel's (runners.HostCPUClocker).
func (r *Runner) HostCPUClock() bool { return true }

// Capabilities of bwrap sandboxes: they can be put on the harness network
// (when the target says so), the host views them (Inspect, HostPID,
// CPUMeter through the cgroup), the probe is bound read-only, and a task
// can be a sandbox's first process. No ResidueFinder: the residue probes
// are not tested.
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: true, Inspect: true, ProbeDelivery: true, TaskLaunch: true, HostPID: true, CPUMeter: true}
}

// Sandbox is one running bwrap sandbox: its cgroup, network namespace and
// first process (bwrap) are process.Host's, the rest its own.
type Sandbox struct {
	process.Host
	r        *Runner
	state    string // its folder under StateRoot
	spec     runners.SandboxSpec
	env      []string
	childPID int             // the sandbox's first process inside its namespaces (bwrap --info-fd)
	netNS    *os.File        // its network namespace, pinned before the command ran (netns.Pin)
	binds    []targets.Mount // the target's binds and the probe folder
	mounted  []string        // host bind mounts under state, to undo
	// taskView is the kernel's view of a task sandbox, read at start while
	// its task waits for its go-ahead: Inspect gives it once the task has
	// ended and taken the sandbox with it.
	taskView *runners.RuntimeView
}

// Start makes the sandbox's cgroup, state folder and network namespace and
// starts bwrap with the probe's idle holder (or spec.Command, a task) as
// its command; it returns once bwrap has set the sandbox up. Every error
// wraps runners.ErrStart, and what was made is removed.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sb, err := r.start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("starting bwrap sandbox %s: %w: %w", spec.Name, runners.ErrStart, err)
	}
	return sb, nil
}

func (r *Runner) start(ctx context.Context, spec runners.SandboxSpec) (sb *Sandbox, err error) {
	if err := process.CheckProbeDir(spec.ProbeDir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(Binary); err != nil {
		return nil, fmt.Errorf("bubblewrap: %w (install Debian's bubblewrap)", err)
	}
	if spec.Hostname == "" {
		// The engine fills a target's host name from the docker section
		// only: the harness's labels name run, target and task.
		spec.Hostname = r.cfg.IdentityHostname(targets.Identity{
			RunID: spec.Labels["sandcheck.run"], Target: spec.Labels["sandcheck.target"], Task: spec.Labels["sandcheck.task"]})
	}
	sb = &Sandbox{r: r, spec: spec}
	sb.SandboxID = process.NewID(idPrefix)
	sb.Log = r.Logger().With("sandbox", sb.SandboxID)
	sb.NotReaped = "bwrap (pid %d) was not reaped"
	sb.Cleanup = sb.removeState
	defer func() {
		if err != nil {
			err = errors.Join(err, sb.Teardown())
		}
	}()
	sb.state = filepath.Join(StateRoot, sb.SandboxID)
	if err := sb.writeState(); err != nil {
		return sb, err
	}
	if err := sb.mountBinds(); err != nil {
		return sb, err
	}
	if err := sb.mountTmpfs(); err != nil {
		return sb, err
	}
	if sb.Cgroup, err = process.NewCgroup(sb.SandboxID, r.cfg.Limits); err != nil {
		return sb, err
	}
	if err := sb.Cgroup.Record(sb.state); err != nil {
		return sb, err
	}
	if r.cfg.Network == "harness" {
		joined := r.JoinedNetwork()
		var docker client.NetworkAPIClient
		if joined == nil {
			if docker, err = r.NetworkAPI(ctx); err != nil {
				return sb, err
			}
		}
		if sb.Net, err = process.OpenNetwork(ctx, "harness", spec.Network, sb.SandboxID, joined, docker); err != nil {
			return sb, err
		}
	}
	sb.env = process.Environ(r.cfg.Env, spec.Env)
	if err := sb.KeepLease(spec.ProbeDir, spec.Command); err != nil {
		return sb, err
	}
	cmd, info, block, err := sb.startCommand(process.HolderArgv(spec.Command))
	if err != nil {
		return sb, err
	}
	defer block.Close()
	sb.First, err = process.StartProc(cmd)
	closeExtra(cmd)
	if err != nil {
		info.Close()
		return sb, err
	}
	pid, err := readInfo(ctx, info, sb.First)
	if err != nil {
		block.Close()
		res, _ := sb.First.Wait(context.Background())
		return sb, fmt.Errorf("%w (bwrap: %s)", err, strings.TrimSpace(string(res.Stderr)))
	}
	sb.childPID = pid
	// bwrap's child waits on the block pipe, in the sandbox's namespaces,
	// before it runs the command: the namespace it was given is pinned now,
	// before the box could move its first process anywhere else.
	if sb.netNS, err = netns.Pin(pid); err != nil {
		return sb, fmt.Errorf("pinning the sandbox's network namespace: %w", err)
	}
	if _, err := block.Write([]byte{1}); err != nil {
		return sb, fmt.Errorf("letting bwrap run the sandbox's command: %w", err)
	}
	block.Close()
	if len(spec.Command) == 0 {
		if err := sb.CheckHolder(ctx); err != nil {
			return sb, err
		}
	} else if err := sb.waitTaskExec(ctx, spec.Command[0]); err != nil {
		sb.Log.Debug("a task sandbox's command did not start in time to be inspected", "err", err)
	} else if v, err := sb.Inspect(ctx); err == nil {
		sb.taskView = &v
	} else {
		sb.Log.Debug("inspecting a task sandbox at start", "err", err)
	}
	sb.Log.Debug("sandbox ready", "pid", pid)
	return sb, nil
}

// readInfo reads bwrap's --info-fd report: the sandbox's first process.
func readInfo(ctx context.Context, info *os.File, first *process.Proc) (int, error) {
	type report struct {
		ChildPID int `json:"child-pid"`
	}
	got := make(chan report, 1)
	go func() {
		defer info.Close()
		var rep report
		_ = json.NewDecoder(info).Decode(&rep)
		got <- rep
	}()
	select {
	case rep := <-got:
		if rep.ChildPID <= 0 {
			return 0, errors.New("bwrap did not set the sandbox up")
		}
		return rep.ChildPID, nil
	case <-ctx.Done():
		first.Kill()
		return 0, fmt.Errorf("waiting for bwrap to set the sandbox up: %w", ctx.Err())
	}
}

// closeExtra closes the parent's copies of the files handed to a child.
func closeExtra(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			f.Close()
		}
	}
}

// CopyIn copies a host file into the running sandbox: a shell of the
// sandbox (the host's /usr/bin/sh, bound in) entered with nsenter into the
// first process's namespaces and root, as the sandbox's user, writes it
// from its standard input; so the file lands in the sandbox's own tmpfs or
// writable bind, owned by the sandbox's user, and a symbolic link in the
// sandbox cannot point the write at the host.
func (sb *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	if !filepath.IsAbs(sandboxPath) || filepath.Clean(sandboxPath) != sandboxPath || sandboxPath == "/" {
		return fmt.Errorf("copying %s in: %q is not a clean absolute file path", hostPath, sandboxPath)
	}
	if err := sb.Running(); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	f, err := os.Open(hostPath)
	if err != nil {
		return fmt.Errorf("copying in: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("copying %s in: not a regular file (%v)", hostPath, err)
	}
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(sb.childPID), "--all", "-S", strconv.Itoa(sb.r.uid), "-G", strconv.Itoa(sb.r.gid),
		"--root", "--wd=/", "--", "/bin/sh", "-c", `cat > "$1"`, "sh", sandboxPath)
	cmd.Stdin = f
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	res, err := process.Run(ctx, cmd)
	if err != nil {
		return fmt.Errorf("copying %s to %s: %w", hostPath, sandboxPath, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("copying %s to %s: exit code %d: %s", hostPath, sandboxPath, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Exec runs argv in the sandbox (see the package comment for how, and its
// limits) and waits for it; output is capped at runners.MaxOutput each.
// When ctx ends first the command is killed and Exec returns exit code -1
// and ctx's error.
func (sb *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	if err := sb.Running(); err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	cmd, err := sb.execCommand(argv)
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	res, err := process.Run(ctx, cmd)
	closeExtra(cmd)
	if err != nil {
		return res, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	return res, nil
}

// removeState unmounts the binds and removes the state folder (the
// sandbox's process.Host.Cleanup).
func (sb *Sandbox) removeState() error {
	var errs []error
	if sb.netNS != nil {
		errs = append(errs, sb.netNS.Close())
		sb.netNS = nil
	}
	if sb.state != "" {
		// Never remove through a mount: the state folder goes only once
		// nothing is mounted under it.
		uerr := sb.unmountBinds()
		left, merr := hostmounts.Under(sb.state)
		switch {
		case uerr != nil || merr != nil:
			errs = append(errs, uerr, merr)
		case len(left) > 0:
			errs = append(errs, fmt.Errorf("mounts remain under %s: %v; leaving it", sb.state, left))
		default:
			if err := os.RemoveAll(sb.state); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", sb.state, err))
			}
		}
	}
	return errors.Join(errs...)
}

// VerifyTeardown lists what survived Close: processes naming the sandbox's
// state folder, its cgroup folders, its state folder, its veth end.
func (sb *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	if err := sb.CheckClosed(); err != nil {
		return nil, err
	}
	left := sb.Cgroup.Leftovers()
	mnts, err := hostmounts.Under(sb.state)
	if err != nil {
		return left, err
	}
	for _, m := range mnts {
		left = append(left, "mount "+m+" still exists")
	}
	if _, err := os.Stat(sb.state); err == nil {
		left = append(left, "state folder "+sb.state+" still exists")
	}
	left = append(left, processesNaming(sb.state)...)
	if sb.Net != nil {
		links, err := sb.Net.Leftovers()
		if err != nil {
			return left, err
		}
		left = append(left, links...)
	}
	return left, nil
}

// processesNaming lists host processes whose command line contains s (every
// bwrap of a sandbox names its state folder).
func processesNaming(s string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		if filepath.Base(filepath.Dir(n)) == strconv.Itoa(os.Getpid()) {
			continue
		}
		out = append(out, fmt.Sprintf("process %s (%.120s) names the sandbox", filepath.Base(filepath.Dir(n)), strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return out
}
