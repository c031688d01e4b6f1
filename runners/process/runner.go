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
// per-sandbox cgroup (Cgroup) and capped command output (Proc, Run).
package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.Sandbox          = (*Sandbox)(nil)
	_ runners.Waiter           = (*Sandbox)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
	_ runners.CPUMeter         = (*Sandbox)(nil)
)

// holdMax bounds the idle holder's life, so a sandbox the harness lost ends.
const holdMax = 2 * time.Hour

// Runner starts process sandboxes for one target. It is safe for
// concurrent use.
type Runner struct {
	cfg    targets.Process
	log    *slog.Logger
	docker client.NetworkAPIClient
}

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(r *Runner) {
		if l != nil {
			r.log = l
		}
	}
}

// WithDocker sets the engine client through which a harness network is
// looked up (needed for network harness).
func WithDocker(c client.NetworkAPIClient) Option { return func(r *Runner) { r.docker = c } }

// New returns a runner for the target's process section.
func New(cfg targets.Process, opts ...Option) (*Runner, error) {
	if cfg.Network != "none" && cfg.Network != "harness" {
		return nil, fmt.Errorf("process configuration: network %q is not none or harness", cfg.Network)
	}
	r := &Runner{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Name identifies the backend.
func (r *Runner) Name() string { return "process" }

// Capabilities: a harness network when the target asks for one; no host
// view beyond the cgroup; the probe folder is not read-only to the process.
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: r.cfg.Network == "harness"}
}

// Sandbox is one process sandbox: its first process, its cgroup and its
// network namespace.
type Sandbox struct {
	id       string
	probeDir string
	env      []string
	cg       *Cgroup
	ns       *netharness.Namespace
	first    *Proc
	log      *slog.Logger

	mu       sync.Mutex
	closed   bool
	closeRan bool
	killed   bool
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
	sb = &Sandbox{id: NewID("scproc"), probeDir: spec.ProbeDir, log: r.log}
	sb.log = r.log.With("sandbox", sb.id)
	defer func() {
		if err != nil {
			err = errors.Join(err, sb.teardown())
		}
	}()
	if sb.cg, err = NewCgroup(sb.id, r.cfg.Limits); err != nil {
		return sb, err
	}
	if sb.ns, err = OpenNetwork(ctx, r.cfg.Network, spec.Network, r.docker); err != nil {
		return sb, err
	}
	sb.env = Environ(r.cfg.Env, spec.Env)
	argv := spec.Command
	if len(argv) == 0 {
		argv = []string{runners.ProbeMount + "/" + runners.ProbeBinary, "hold", "--max", holdMax.String()}
	}
	sb.first, err = StartProc(sb.command(argv))
	if err != nil {
		return sb, err
	}
	if len(spec.Command) == 0 {
		// The holder must be running, not dead on arrival.
		select {
		case <-sb.first.Done():
			res, _ := sb.first.Wait(ctx)
			return sb, fmt.Errorf("the holder exited at once with code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return sb, nil
}

// command is argv as a host process in the sandbox's cgroup and network
// namespace: a shell joins the cgroup, then nsenter enters the namespace
// and execs argv, so argv and all it forks start inside both.
func (sb *Sandbox) command(argv []string) *exec.Cmd {
	argv = rewriteProbePaths(argv, sb.probeDir)
	script := sb.cg.JoinScript() + `exec nsenter --net=/proc/self/fd/3 -- "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, argv...)...)
	cmd.Env = sb.env
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{sb.ns.File()}
	return cmd
}

// rewriteProbePaths points arguments under runners.ProbeMount at dir.
func rewriteProbePaths(argv []string, dir string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == runners.ProbeMount || strings.HasPrefix(a, runners.ProbeMount+"/") {
			a = dir + strings.TrimPrefix(a, runners.ProbeMount)
		}
		out[i] = a
	}
	return out
}

// ID names the sandbox (and its cgroup).
func (sb *Sandbox) ID() string { return sb.id }

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
	sb.mu.Lock()
	dead := sb.closeRan || sb.killed
	sb.mu.Unlock()
	if dead || sb.first.Exited() {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: the sandbox %s is not running", argv[0], sb.id)
	}
	res, err := Run(ctx, sb.command(argv))
	if err != nil {
		return res, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	return res, nil
}

// Wait waits for the first process (the task) and returns its exit code and
// output.
func (sb *Sandbox) Wait(ctx context.Context) (runners.ExitResult, error) {
	return sb.first.Wait(ctx)
}

// CPUUsed is the cgroup's CPU time.
func (sb *Sandbox) CPUUsed() (time.Duration, error) { return sb.cg.CPUUsed() }

// Kill stops every process of the sandbox; Close still removes it.
func (sb *Sandbox) Kill(ctx context.Context) error {
	sb.mu.Lock()
	sb.killed = true
	sb.mu.Unlock()
	return sb.cg.Kill()
}

// Close kills every process in the cgroup, removes the cgroup and drops the
// network namespace. It ignores ctx; calling it twice is safe.
func (sb *Sandbox) Close(ctx context.Context) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.closeRan = true
	if sb.closed {
		return nil
	}
	if err := sb.teardown(); err != nil {
		return fmt.Errorf("closing %s: %w", sb.id, err)
	}
	sb.closed = true
	return nil
}

func (sb *Sandbox) teardown() error {
	var errs []error
	if sb.cg != nil {
		errs = append(errs, sb.cg.Remove())
	}
	if sb.first != nil {
		sb.first.Kill()
		select {
		case <-sb.first.Done():
		case <-time.After(killWait):
			errs = append(errs, fmt.Errorf("the first process %d was not reaped", sb.first.Pid()))
		}
	}
	if sb.ns != nil {
		errs = append(errs, sb.ns.Close())
	}
	return errors.Join(errs...)
}

// VerifyTeardown lists what survived Close: the cgroup's folders and the
// network namespace's veth end.
func (sb *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	sb.mu.Lock()
	ran := sb.closeRan
	sb.mu.Unlock()
	if !ran {
		return nil, fmt.Errorf("verifying teardown of %s: the sandbox was not closed", sb.id)
	}
	left := sb.cg.Leftovers()
	links, err := sb.ns.Leftovers()
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

// OpenNetwork makes the sandbox's network namespace: isolated for network
// none, on the harness network (the spec's network) for harness.
func OpenNetwork(ctx context.Context, mode, network string, docker client.NetworkAPIClient) (*netharness.Namespace, error) {
	switch mode {
	case "none":
		return netharness.Isolated()
	case "harness":
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
		return netharness.Attach(ctx, docker, network)
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
