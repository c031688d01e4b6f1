// Package process is the process runner (runner: process), the unsandboxed
// control and the first row of every comparison: the probe runs as a plain
// host process, as the host's root, inside a cgroup with limits (so a fork
// or memory bomb stays bounded) and a network namespace the harness makes
// (isolated, or on the harness bridge, so its traffic stays on harness
// addresses), and nothing else. Most probes escape; that is its point.
//
// The probe folder is not mounted anywhere (that would take a mount
// namespace): an argument naming a path under runners.ProbeMount is
// rewritten to the same path under the spec's ProbeDir, which the process
// can write (Capabilities().ProbeDelivery is false). The process's
// resolver is the host's /etc/resolv.conf, which the harness's fence
// blocks from the namespace.
//
// The package also holds the host-side pieces the bwrap runner shares: the
// per-sandbox cgroup (Cgroup), capped command output (Proc, Run), the
// sandbox machinery both Sandbox types embed (Host: ID, Wait, CPUUsed,
// Kill, Close, teardown) and the runner state both Runner types embed
// (Base: options, logger, engine client, joined harness network).
package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/runners"
)

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.Sandbox          = (*Sandbox)(nil)
	_ runners.Waiter           = (*Sandbox)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
	_ runners.CPUMeter         = (*Sandbox)(nil)
)

// Runner starts process sandboxes for one target. It is safe for
// concurrent use.
type Runner struct {
	Base
	cfg Config
}

// New returns a runner for the target's process section.
func New(cfg Config, opts ...Option) (*Runner, error) {
	if cfg.Network != "none" && cfg.Network != "harness" {
		return nil, fmt.Errorf("process configuration: network %q is not none or harness", cfg.Network)
	}
	r := &Runner{cfg: cfg}
	r.Configure(opts)
	return r, nil
}

// Name identifies the backend.
func (r *Runner) Name() string { return "process" }

// HostCPUClock is true: the task is a host process, its CPU clock the host
// kernel's (runners.HostCPUClocker).
func (r *Runner) HostCPUClock() bool { return true }

// Capabilities: a process can be put on the harness network (when the
// target says so), a task can be its first process, the host names its pid
// and meters its CPU through the cgroup. No runtime view (Inspect) and no
// read-only probe folder: there is no runtime, and the process can write
// the folder.
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: true, TaskLaunch: true, HostPID: true, CPUMeter: true}
}

// StateRoot holds a folder per process sandbox, named as the sandbox and
// its cgroup, with the owner file of the harness that made it (MarkOwner).
const StateRoot = "/run/sandcheck-process"

const idPrefix = "scproc"

// Sandbox is one process sandbox: its first process, its cgroup and its
// network namespace (Host).
type Sandbox struct {
	Host
	probeDir string
	env      []string
}

// Start makes the cgroup and the network namespace and starts the first
// process (the probe's idle holder, or spec.Command as a task). Every error
// wraps runners.ErrStart, and what was made is removed.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	sb, err := r.start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("starting process sandbox %s: %w: %w", spec.Name, runners.ErrStart, err)
	}
	return sb, nil
}

func (r *Runner) start(ctx context.Context, spec runners.SandboxSpec) (sb *Sandbox, err error) {
	if err := CheckProbeDir(spec.ProbeDir); err != nil {
		return nil, err
	}
	sb = &Sandbox{probeDir: spec.ProbeDir}
	sb.SandboxID = NewID(idPrefix)
	sb.Log = r.log.With("sandbox", sb.SandboxID)
	sb.NotReaped = "the first process %d was not reaped"
	defer func() {
		if err != nil {
			err = errors.Join(err, sb.Teardown())
		}
	}()
	// The state folder holds only the owner file: it is how a sweep after a
	// SIGKILLed harness finds the sandbox's cgroup and what still runs in it.
	state := filepath.Join(StateRoot, sb.SandboxID)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return sb, fmt.Errorf("creating the sandbox's state folder: %w", err)
	}
	sb.Cleanup = func() error { return os.RemoveAll(state) }
	if err := MarkOwner(state); err != nil {
		return sb, err
	}
	if sb.Cgroup, err = NewCgroup(sb.SandboxID, r.cfg.Limits); err != nil {
		return sb, err
	}
	if err := sb.Cgroup.Record(state); err != nil {
		return sb, err
	}
	var docker client.NetworkAPIClient
	joined := r.joined.Get()
	if r.cfg.Network == "harness" && joined == nil {
		if docker, err = r.NetworkAPI(ctx); err != nil {
			return sb, err
		}
	}
	if sb.Net, err = OpenNetwork(ctx, r.cfg.Network, spec.Network, sb.SandboxID, joined, docker); err != nil {
		return sb, err
	}
	sb.env = Environ(r.cfg.Env, spec.Env)
	if err := sb.KeepLease(spec.ProbeDir, spec.Command); err != nil {
		return sb, err
	}
	sb.First, err = StartProc(sb.command(HolderArgv(spec.Command)))
	if err != nil {
		return sb, err
	}
	if len(spec.Command) == 0 {
		// The holder must be running, not dead on arrival.
		return sb, sb.CheckHolder(ctx)
	}
	return sb, nil
}

// command is argv as a host process in the sandbox's cgroup and network
// namespace: a shell joins the cgroup, then nsenter enters the namespace
// and execs argv, so argv and all it forks start inside both.
func (sb *Sandbox) command(argv []string) *exec.Cmd {
	argv = rewriteProbePaths(argv, sb.probeDir)
	script := sb.Cgroup.JoinScript() + `exec nsenter --net=/proc/self/fd/3 -- "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, argv...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{sb.Net.File()}
	return cmd
}

// rewriteProbePaths points arguments under runners.ProbeMount at dir,
// and the probe folder named in a JSON word (the probe's parameters: its
// probe_dir, where privilege.setuid-binaries looks for the harness's
// setuid canary).
func rewriteProbePaths(argv []string, dir string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a == runners.ProbeMount || strings.HasPrefix(a, runners.ProbeMount+"/"):
			a = dir + strings.TrimPrefix(a, runners.ProbeMount)
		case strings.HasPrefix(a, "{"):
			a = strings.ReplaceAll(a, `"`+runners.ProbeMount+`"`, strconv.Quote(dir))
			a = strings.ReplaceAll(a, `"`+runners.ProbeMount+`/`, `"`+dir+`/`)
		}
		out[i] = a
	}
	return out
}

// CopyIn copies a host file to sandboxPath on the host: the process shares
// the host's file system.
func (sb *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	return CopyFile(hostPath, sandboxPath)
}

// Exec runs argv as another process of the sandbox (same cgroup, same
// network namespace, same environment). It fails once the sandbox was
// killed or closed, or its first process has ended.
func (sb *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	if err := sb.Running(); err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	res, err := Run(ctx, sb.command(argv))
	if err != nil {
		return res, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	return res, nil
}

// VerifyTeardown lists what survived Close: the cgroup's folders and the
// network namespace's veth end.
func (sb *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	if err := sb.CheckClosed(); err != nil {
		return nil, err
	}
	left := sb.Cgroup.Leftovers()
	if _, err := os.Lstat(filepath.Join(StateRoot, sb.SandboxID)); err == nil {
		left = append(left, "state folder "+filepath.Join(StateRoot, sb.SandboxID))
	}
	links, err := sb.Net.Leftovers()
	return append(left, links...), err
}

// NewID makes a host-unique sandbox ID with the prefix.
func NewID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// CheckProbeDir makes a missing or unusable probe binary a clear error.
func CheckProbeDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("probe folder %q is not an absolute path", dir)
	}
	p := filepath.Join(dir, runners.ProbeBinary)
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("probe binary: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("probe binary %s is not an executable regular file", p)
	}
	return nil
}

// OpenNetwork makes the network namespace of sandbox owner: isolated for
// network none; for harness, on the run's harness network the engine handed
// over (joined), else on the spec's network looked up through docker.
func OpenNetwork(ctx context.Context, mode, network, owner string, joined *netharness.Network, docker client.NetworkAPIClient) (*netharness.Namespace, error) {
	switch mode {
	case "none":
		return netharness.Isolated()
	case "harness":
		if joined != nil {
			return netharness.AttachTo(joined, owner)
		}
		if network == "" {
			return nil, errors.New("network harness, but the spec names no harness network")
		}
		if docker == nil {
			c, err := client.New(client.FromEnv)
			if err != nil {
				return nil, fmt.Errorf("docker client for the harness network: %w", err)
			}
			defer c.Close()
			docker = c
		}
		return netharness.Attach(ctx, docker, network, owner)
	}
	return nil, fmt.Errorf("network %q is not none or harness", mode)
}

// Environ is the sandbox's whole environment: a fixed PATH, then the
// target's variables, then the spec's, sorted.
func Environ(target, spec map[string]string) []string {
	m := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range target {
		m[k] = v
	}
	for k, v := range spec {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// CopyFile copies one regular host file to dst, keeping its permission bits
// (without setuid or setgid).
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copying in: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copying %s in: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("copying %s in: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copying %s in: %w", src, err)
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// Spawn starts argv as another process of the sandbox with env added and
// returns without waiting for it. Every process of this runner is the
// host's root, whatever user is asked for.
func (sb *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	cmd := sb.command(argv)
	cmd.Env = append(cmd.Env, env...)
	if _, err := StartProc(cmd); err != nil {
		return fmt.Errorf("spawn of %s: %w", argv[0], err)
	}
	return nil
}
