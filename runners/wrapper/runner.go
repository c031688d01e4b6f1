// Package wrapper is the wrapper runner (runner: wrapper), for sandboxes
// that are a command prefix rather than a box a platform creates, execs
// into and deletes: Anthropic's sandbox runtime (srt), firejail, bubblewrap
// invoked by hand, the sandboxes of coding agents' CLIs. A sandbox is a
// fresh folder (${WORKDIR}, owned by the target's user, removed at Close)
// and the target's argv template; every command is one invocation of the
// wrapper, started as the target's user in a cgroup and a network
// namespace the runner made for the sandbox (package process's Cgroup and
// netharness), so the wrapper's whole process tree, and whatever of it
// outlives the wrapper, is the sandbox's on the host.
//
// The probe folder is bind-mounted read-only on the host under the
// sandbox's state folder (${PROBE_DIR}); words of a command naming
// runners.ProbeMount, and the probe folder named in the probe's JSON
// parameters, are pointed there, since a wrapper shows the box the host's
// file system (what it hides is its business). A wrapper that moves or
// hides that folder cannot run the probe: Start's check says so. The
// parameters themselves (the probe list with them) reach the probe as a
// file of that folder (--params-file), not as an argument: a wrapper may
// bound an argument's length or the number of arguments (firejail: 4,128
// bytes, 128 arguments).
//
// Start proves the wrapper runs commands: it runs the probe's list through
// it and wants its output, and only that (one ID-shaped word a line). A
// wrapper that exits 0 without running the command, prints nothing, or
// prints words of its own (a banner) is refused there with one error that
// quotes them (a harness error, never a pass).
package wrapper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/process"
)

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.Sandbox          = (*Sandbox)(nil)
	_ runners.Waiter           = (*Sandbox)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
	_ runners.CPUMeter         = (*Sandbox)(nil)
	_ runners.TreeExecer       = (*Sandbox)(nil)
)

// StateRoot holds each sandbox's folder while it runs: its probe mount
// and its ${WORKDIR}.
const StateRoot = "/run/sandcheck-wrapper"

// Bounds.
const (
	defaultStartTimeout = 60 * time.Second
)

// ErrNotRun means the wrapper did not run the command it was given: it
// exited 0 and printed nothing of the command's (a wrapper that drops
// its argument, /bin/true). It is a harness error, never a finding.
var ErrNotRun = errors.New("the wrapper did not run the command")

// Runner starts wrapper sandboxes for one target. It is safe for
// concurrent use.
type Runner struct {
	process.Base
	cfg     Config
	baseDir string
	id      Identity
	prog    string // Argv[0] resolved on PATH

	// checked is set once a sandbox's start has seen the wrapper run the
	// probe's list (check): every later invocation is the same argv, user
	// and environment, so later starts skip the check (each would be one
	// more wrapper start, a Node.js start for srt, on every sandbox).
	checkMu sync.Mutex
	checked bool
}

// Option configures a Runner (process.Option: the host-process runners
// share their options).
type Option = process.Option

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return process.WithLogger(l) }

// WithDocker sets the engine client through which the harness network is
// looked up (network harness); the default makes one from the environment.
func WithDocker(c client.NetworkAPIClient) Option { return process.WithDocker(c) }

// New checks the configuration against this host (the wrapper on PATH,
// the user). baseDir resolves relative settings files (the target file's
// folder).
func New(cfg Config, baseDir string, opts ...Option) (*Runner, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("wrapper configuration: argv is empty")
	}
	if cfg.Network != "none" && cfg.Network != "harness" && cfg.Network != "proxy" {
		return nil, fmt.Errorf("wrapper configuration: network %q is not none, harness or proxy", cfg.Network)
	}
	r := &Runner{cfg: cfg, baseDir: baseDir}
	var err error
	if r.id, err = lookupUser(cfg.User); err != nil {
		return nil, fmt.Errorf("wrapper configuration: %w", err)
	}
	if r.prog, err = lookPath(cfg.Argv[0], cfg.path()); err != nil {
		return nil, fmt.Errorf("wrapper configuration: %w", err)
	}
	for _, f := range cfg.Files {
		if !localPath(f.Path) {
			return nil, fmt.Errorf("wrapper configuration: file path %q is not inside ${WORKDIR}", f.Path)
		}
	}
	r.Configure(opts)
	return r, nil
}

// Name identifies the backend.
func (r *Runner) Name() string { return "wrapper" }

// HostCPUClock is true: the wrapper's tree is host processes, their CPU
// clock the host kernel's (runners.HostCPUClocker).
func (r *Runner) HostCPUClock() bool { return true }

// Capabilities: the wrapper can be put on the harness network (when the
// target says so), a task can be a wrapper invocation of its own, and the
// host meters its CPU through the cgroup; the probe folder is delivered
// read-only; after Close it looks for what the box left on the host
// (residue.go). No runtime view (a wrapper has no runtime to ask) and no host
// PID (no process of the sandbox lives between invocations): the host's
// tracer follows each invocation from its root instead, which the runner
// holds until the tracer watches it (runners.TreeExecer, SandboxSpec.Watch).
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: true, ProbeDelivery: true, TaskLaunch: true, CPUMeter: true, Residue: true}
}

// Sandbox is one wrapper sandbox: its folder, cgroup and network
// namespace. Each Exec is one invocation of the wrapper.
type Sandbox struct {
	r        *Runner
	id       string
	log      *slog.Logger
	state    string // StateRoot/<id>
	probe    string // state/probe: the probe folder, bound read-only
	probeSrc string // the host's probe folder (SandboxSpec.ProbeDir), the source of probe
	workdir  string // state/work
	dns      string // the harness's resolver (SandboxSpec.DNS), for ${DNS}
	env      []string
	cgroup   *process.Cgroup
	net      *netNamespace
	task     *process.Proc // the first invocation, with spec.Command

	mu       sync.Mutex
	params   int // parameters files written (paramsFile)
	mounted  bool
	killed   bool
	closeRan bool
	closed   bool
}

// Start makes the sandbox's folder, cgroup and network namespace, checks
// (at the runner's first start, checkOnce) that the wrapper runs a command
// (the probe's list) and, with
// spec.Command, starts the task as the first invocation. Every error wraps
// runners.ErrStart, and what was made is removed.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sb, err := r.start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("starting wrapper sandbox %s: %w: %w", spec.Name, runners.ErrStart, err)
	}
	return sb, nil
}

func (r *Runner) start(ctx context.Context, spec runners.SandboxSpec) (sb *Sandbox, err error) {
	if err := process.CheckProbeDir(spec.ProbeDir); err != nil {
		return nil, err
	}
	sb = &Sandbox{r: r, id: process.NewID(idPrefix)}
	sb.log = r.Logger().With("sandbox", sb.id)
	sb.state = filepath.Join(StateRoot, sb.id)
	sb.probe = filepath.Join(sb.state, "probe")
	sb.probeSrc = spec.ProbeDir
	sb.workdir = filepath.Join(sb.state, "work")
	if len(spec.DNS) > 0 {
		sb.dns = spec.DNS[0]
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, sb.teardown())
		}
	}()
	if err := sb.makeFolders(spec.ProbeDir); err != nil {
		return sb, err
	}
	if sb.cgroup, err = process.NewCgroup(sb.id, r.cfg.Limits); err != nil {
		return sb, err
	}
	if sb.net, err = r.openNetwork(ctx, spec.Network, sb.id); err != nil {
		return sb, err
	}
	sb.env = sb.environ(spec.Env)
	if err := sb.checkOnce(ctx); err != nil {
		return sb, err
	}
	if len(spec.Command) > 0 {
		cmd, err := sb.command(spec.Command, spec.Watch != nil)
		if err != nil {
			return sb, err
		}
		if sb.task, err = startHeld(cmd, spec.Watch); err != nil {
			return sb, err
		}
	}
	sb.log.Debug("sandbox ready", "workdir", sb.workdir)
	return sb, nil
}

// makeFolders makes the state folder, the probe mount (read-only, private)
// and ${WORKDIR} with the target's files, owned by the target's user.
func (sb *Sandbox) makeFolders(probeDir string) error {
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", StateRoot, err)
	}
	if err := os.Mkdir(sb.state, 0o755); err != nil {
		return fmt.Errorf("making the sandbox's folder: %w", err)
	}
	if err := process.MarkOwner(sb.state); err != nil {
		return err
	}
	if err := os.Mkdir(sb.probe, 0o755); err != nil {
		return fmt.Errorf("making the probe mount point: %w", err)
	}
	if err := unix.Mount(probeDir, sb.probe, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting the probe folder %s: %w", probeDir, err)
	}
	sb.mounted = true
	if err := unix.Mount("", sb.probe, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the probe mount private: %w", err)
	}
	if err := unix.Mount("", sb.probe, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the probe mount read-only: %w", err)
	}
	if err := os.Mkdir(sb.workdir, 0o700); err != nil {
		return fmt.Errorf("making the work folder: %w", err)
	}
	if err := os.Chown(sb.workdir, sb.r.id.UID, sb.r.id.GID); err != nil {
		return fmt.Errorf("giving the work folder to uid %d: %w", sb.r.id.UID, err)
	}
	for _, f := range sb.r.cfg.Files {
		if err := sb.placeFile(f); err != nil {
			return err
		}
	}
	return nil
}

// placeFile copies one settings file into ${WORKDIR}, as the target's
// user would have it: made, not followed (no folder of it is a link the
// wrapper could have planted, since the folder is fresh).
func (sb *Sandbox) placeFile(f File) error {
	dst := filepath.Join(sb.workdir, f.Path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("placing %s: %w", f.Path, err)
	}
	for d := filepath.Dir(dst); d != sb.workdir && strings.HasPrefix(d, sb.workdir); d = filepath.Dir(d) {
		if err := os.Chown(d, sb.r.id.UID, sb.r.id.GID); err != nil {
			return fmt.Errorf("placing %s: %w", f.Path, err)
		}
	}
	if err := process.CopyFile(resolve(sb.r.baseDir, f.Source), dst); err != nil {
		return fmt.Errorf("placing the wrapper's file %s: %w", f.Path, err)
	}
	if err := os.Chown(dst, sb.r.id.UID, sb.r.id.GID); err != nil {
		return fmt.Errorf("placing %s: %w", f.Path, err)
	}
	return nil
}

// environ is the wrapper's environment: PATH and HOME (${WORKDIR}) unless
// the target sets them, the target's, then the spec's; ${WORKDIR} filled.
// With network proxy the spec's proxy variables (the harness's own egress
// proxy) are left out: the wrapper's proxy is the control under test, and
// srt's would chain through the harness's.
func (sb *Sandbox) environ(spec map[string]string) []string {
	if sb.r.cfg.Network == "proxy" {
		spec = withoutProxy(spec)
	}
	target := map[string]string{"HOME": VarWorkdir, "USER": sb.r.id.Name, "LOGNAME": sb.r.id.Name}
	for k, v := range sb.r.cfg.Env {
		target[k] = v
	}
	for k, v := range target {
		target[k] = strings.ReplaceAll(v, VarWorkdir, sb.workdir)
	}
	if sb.r.id.Name == "" {
		delete(target, "USER")
		delete(target, "LOGNAME")
	}
	return process.Environ(target, spec)
}

// withoutProxy is env without the proxy variables.
func withoutProxy(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
			continue
		}
		out[k] = v
	}
	return out
}

// checkOnce runs check unless an earlier start of the runner passed it.
func (sb *Sandbox) checkOnce(ctx context.Context) error {
	r := sb.r
	r.checkMu.Lock()
	defer r.checkMu.Unlock()
	if r.checked {
		return nil
	}
	if err := sb.check(ctx); err != nil {
		return err
	}
	r.checked = true
	return nil
}

// check runs the probe's list through the wrapper: it must exit 0 and
// print what list prints. Anything else is the one error of the start.
func (sb *Sandbox) check(ctx context.Context) error {
	argv := []string{runners.ProbeMount + "/" + runners.ProbeBinary, "list"}
	cmd, err := sb.command(argv, false)
	if err != nil {
		return err
	}
	res, err := process.Run(ctx, cmd)
	if err != nil {
		return fmt.Errorf("checking that the wrapper runs a command: %w", err)
	}
	out := bytes.TrimSpace(res.Stdout)
	switch {
	case res.ExitCode != 0:
		return fmt.Errorf("checking that the wrapper runs a command: %s %s exited %d: stdout %s, stderr %s", sb.r.cfg.Argv[0], strings.Join(argv, " "), res.ExitCode, excerpt(res.Stdout), excerpt(res.Stderr))
	case len(out) == 0:
		return fmt.Errorf("%w: %s exited 0 but the probe's list printed nothing (stderr %s): it dropped the command, or hid the probe folder", ErrNotRun, sb.r.cfg.Argv[0], excerpt(res.Stderr))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !listLine.MatchString(line) {
			return fmt.Errorf("%w: %s exited 0 but printed what the probe's list does not (%q in stdout %s, stderr %s): a wrapper's own words would be read as the probe's", ErrNotRun, sb.r.cfg.Argv[0], line, excerpt(res.Stdout), excerpt(res.Stderr))
		}
	}
	return nil
}

// listLine is one line of the probe's list: one probe ID-shaped word.
var listLine = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// excerpt is the start of a command's error output, on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	if s == "" {
		return "(none)"
	}
	return strconv.Quote(s)
}

// command is argv as one invocation of the wrapper: a root shell joins the
// sandbox's cgroup, nsenter enters its network namespace, setpriv drops to
// the target's user, and the wrapper runs in ${WORKDIR}. A held command's
// shell first waits for its go-ahead (startHeld).
func (sb *Sandbox) command(argv []string, held bool) (*exec.Cmd, error) {
	argv, err := sb.paramsFile(sb.rewrite(argv))
	if err != nil {
		return nil, err
	}
	words, err := expand(sb.r.cfg.Argv, argv, sb.workdir, sb.probe, sb.dns)
	if err != nil {
		return nil, err
	}
	words[0] = sb.r.prog
	groups := "--clear-groups"
	if sb.r.id.Name != "" {
		groups = "--init-groups"
	}
	cmd := sb.hostCommand(words, !sb.r.id.Root(), groups, held)
	cmd.Env = sb.env
	cmd.Dir = sb.workdir
	return cmd, nil
}

// hostCommand is argv as a host process of the sandbox: a root shell joins
// the sandbox's cgroup, nsenter enters its network namespace (fd 3) and,
// asUser, setpriv drops to the target's user with groups (setpriv's
// --init-groups or --clear-groups). A held shell first reads its go-ahead
// from fd 4, the read end of startHeld's pipe: an EOF before the line (the
// runner gave up) ends it unrun.
func (sb *Sandbox) hostCommand(argv []string, asUser bool, groups string, held bool) *exec.Cmd {
	script := sb.cgroup.JoinScript() + `exec nsenter --net=/proc/self/fd/3 -- "$@"`
	if held {
		script = `read -r go <&4 || exit 125; exec 4<&-; ` + script
	}
	pre := []string{"-c", script, "sh"}
	if asUser {
		pre = append(pre, "setpriv", "--reuid="+strconv.Itoa(sb.r.id.UID), "--regid="+strconv.Itoa(sb.r.id.GID), groups, "--")
	}
	cmd := exec.Command("/bin/sh", append(pre, argv...)...)
	cmd.ExtraFiles = []*os.File{sb.net.File()}
	return cmd
}

// startHeld starts cmd, held at its go-ahead when watch is set (command's
// held): watch gets the root shell's host pid before the shell has run
// anything of the command, and the shell goes on once watch returns.
func startHeld(cmd *exec.Cmd, watch func(pid int)) (*process.Proc, error) {
	if watch == nil {
		return process.StartProc(cmd)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the command's go-ahead: %w", err)
	}
	defer w.Close()
	cmd.ExtraFiles = append(cmd.ExtraFiles, r) // fd 4: fd 3 is the network namespace
	p, err := process.StartProc(cmd)
	r.Close()
	if err != nil {
		return nil, err
	}
	watch(p.Pid())
	if _, err := w.Write([]byte("go\n")); err != nil {
		p.Kill()
		return nil, fmt.Errorf("giving the command its go-ahead: %w", err)
	}
	return p, nil
}

// rewrite points the command's probe paths at the probe mount: words
// under runners.ProbeMount, and the probe folder named in a JSON word
// (the probe's parameters).
func (sb *Sandbox) rewrite(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a == runners.ProbeMount || strings.HasPrefix(a, runners.ProbeMount+"/"):
			a = sb.probe + strings.TrimPrefix(a, runners.ProbeMount)
		case strings.HasPrefix(a, "{"):
			a = strings.ReplaceAll(a, `"`+runners.ProbeMount+`"`, strconv.Quote(sb.probe))
			a = strings.ReplaceAll(a, `"`+runners.ProbeMount+`/`, `"`+sb.probe+`/`)
		}
		out[i] = a
	}
	return out
}

// ParamsFolder is the folder of the probe folder where the wrapper runner
// writes each invocation's parameters (paramsFile).
const ParamsFolder = "params"

// paramsFile moves the probe's parameters (the word after --params) into
// a file of the probe folder and names it with --params-file: a wrapper
// may bound the length of one argument (firejail: 4,128 bytes) below a
// whole catalog's parameters. The file is written on the host's side of
// the read-only bind mount, mode 0444, once (O_EXCL), before the command
// starts; the box reads it at the probe mount.
func (sb *Sandbox) paramsFile(argv []string) ([]string, error) {
	i := slices.Index(argv, "--params")
	if i < 0 || i+1 == len(argv) {
		return argv, nil
	}
	sb.mu.Lock()
	sb.params++
	name := fmt.Sprintf("%s-%d.json", sb.id, sb.params)
	sb.mu.Unlock()
	dir := filepath.Join(sb.probeSrc, ParamsFolder)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("making the parameters folder: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return nil, fmt.Errorf("writing the probe's parameters: %w", err)
	}
	_, err = f.WriteString(argv[i+1])
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("writing the probe's parameters: %w", err)
	}
	out := slices.Concat(argv[:i], []string{"--params-file", filepath.Join(sb.probe, ParamsFolder, name)}, argv[i+2:])
	return out, nil
}

// expand fills the argv template for one command. dns is the harness's
// resolver; a template naming ${DNS} without one is an error (the wrapper
// would be handed an empty address).
func expand(tmpl, argv []string, workdir, probe, dns string) ([]string, error) {
	var out []string
	fill := func(s string) string {
		s = strings.ReplaceAll(s, VarWorkdir, workdir)
		s = strings.ReplaceAll(s, VarDNS, dns)
		return strings.ReplaceAll(s, VarProbeDir, probe)
	}
	for _, w := range tmpl {
		if w == VarArgv {
			out = append(out, argv...)
			continue
		}
		if dns == "" && strings.Contains(w, VarDNS) {
			return nil, errors.New("the wrapper's argv names ${DNS} but the run gave the sandbox no resolver")
		}
		out = append(out, strings.ReplaceAll(fill(w), VarArgvShell, runners.ShellQuote(argv)))
	}
	if len(out) == 0 {
		return nil, errors.New("the wrapper's argv is empty")
	}
	return out, nil
}

// ID names the sandbox (and its cgroup and folder).
func (sb *Sandbox) ID() string { return sb.id }

// running fails once the sandbox was killed or closed.
func (sb *Sandbox) running() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.killed || sb.closeRan {
		return fmt.Errorf("the sandbox %s is not running", sb.id)
	}
	return nil
}

// CopyIn copies a host file into ${WORKDIR} (sandboxPath relative to it,
// or absolute inside it), owned by the target's user: the one folder of
// the host the runner gives the box. A path elsewhere is refused: the
// runner never writes the host's files for the box.
func (sb *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	if err := sb.running(); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	rel := sandboxPath
	if filepath.IsAbs(sandboxPath) {
		r, err := filepath.Rel(sb.workdir, sandboxPath)
		if err != nil {
			return fmt.Errorf("copying %s in: %w", hostPath, err)
		}
		rel = r
	}
	if !localPath(rel) || strings.Contains(rel, "/") {
		return fmt.Errorf("copying %s in: %q is not a file name in the sandbox's folder %s", hostPath, sandboxPath, sb.workdir)
	}
	dst := filepath.Join(sb.workdir, rel)
	// The box may have planted a link at dst: never follow it.
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("copying %s in: %s exists and is not a regular file", hostPath, dst)
	}
	tmp := filepath.Join(sb.workdir, ".sandcheck-copy-"+process.NewID("in"))
	if err := process.CopyFile(hostPath, tmp); err != nil {
		return err
	}
	if err := os.Chown(tmp, sb.r.id.UID, sb.r.id.GID); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	return nil
}

// Workdir is the sandbox's ${WORKDIR} on the host.
func (sb *Sandbox) Workdir() string { return sb.workdir }

// Exec runs argv as one invocation of the wrapper and waits for it; output
// is capped at runners.MaxOutput each. When ctx ends first the invocation's
// process group is killed and Exec returns exit code -1 and ctx's error.
func (sb *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	return sb.ExecTree(ctx, argv, nil)
}

// ExecTree is Exec with the invocation's root shell held, before it runs
// anything of the command, until watch (given its host pid) returns; a nil
// watch holds nothing.
func (sb *Sandbox) ExecTree(ctx context.Context, argv []string, watch func(pid int)) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	if err := sb.running(); err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	cmd, err := sb.command(argv, watch != nil)
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	p, err := startHeld(cmd, watch)
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	res, err := p.WaitOrKill(ctx)
	if err != nil {
		return res, fmt.Errorf("exec of %s: %w", argv[0], err)
	}
	return res, nil
}

// Wait waits for the task (spec.Command's invocation).
func (sb *Sandbox) Wait(ctx context.Context) (runners.ExitResult, error) {
	if sb.task == nil {
		return runners.ExitResult{ExitCode: -1}, errors.New("wait: the sandbox was started without a command")
	}
	return sb.task.Wait(ctx)
}

// Spawn starts argv beside the box, as a host process of the sandbox
// (its cgroup and network namespace, so Close ends it), not through the
// wrapper: the agent's own helper that the wrapped command runs beside.
// User "0" is the host's root; any other user is the target's.
func (sb *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	if err := sb.running(); err != nil {
		return fmt.Errorf("spawn of %s: %w", argv[0], err)
	}
	argv = sb.rewrite(argv)
	if uid, err := strconv.Atoi(user); user != "0" && user != "" && (err != nil || uid != sb.r.id.UID) {
		return fmt.Errorf("spawn of %s: user %q is neither 0 nor the target's user", argv[0], user)
	}
	cmd := sb.hostCommand(argv, user != "0", "--clear-groups", false)
	cmd.Env = append(append([]string(nil), sb.env...), env...)
	cmd.Dir = "/"
	if _, err := process.StartProc(cmd); err != nil {
		return fmt.Errorf("spawn of %s: %w", argv[0], err)
	}
	return nil
}

// CPUUsed is the sandbox cgroup's CPU time.
func (sb *Sandbox) CPUUsed() (time.Duration, error) { return sb.cgroup.CPUUsed() }

// Kill stops every process of the sandbox; Close still removes it.
func (sb *Sandbox) Kill(ctx context.Context) error {
	sb.mu.Lock()
	sb.killed = true
	sb.mu.Unlock()
	return sb.cgroup.Kill()
}

// Close kills every process of the sandbox (its cgroup's: the wrappers
// and whatever they left), removes the cgroup, the network namespace, the
// probe mount and the sandbox's folder. It ignores ctx; calling it twice
// is safe.
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

// teardown removes what of the sandbox was made; a failed start calls it
// directly.
func (sb *Sandbox) teardown() error {
	var errs []error
	if sb.cgroup != nil {
		errs = append(errs, sb.cgroup.Remove())
	}
	if sb.task != nil {
		sb.task.Kill()
		select {
		case <-sb.task.Done():
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("the task's wrapper (pid %d) was not reaped", sb.task.Pid()))
		}
	}
	if sb.net != nil {
		errs = append(errs, sb.net.Close())
	}
	if sb.mounted {
		if err := unix.Unmount(sb.probe, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", sb.probe, err))
		} else {
			sb.mounted = false
		}
	}
	if sb.state != "" && !sb.mounted {
		// RemoveAll does not follow links: what the box left in ${WORKDIR}
		// goes, the host paths it points at stay.
		if err := os.RemoveAll(sb.state); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", sb.state, err))
		}
	}
	return errors.Join(errs...)
}

// VerifyTeardown lists what survived Close: the cgroup's folders, the
// sandbox's folder, host processes naming it, the veth end.
func (sb *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	sb.mu.Lock()
	ran := sb.closeRan
	sb.mu.Unlock()
	if !ran {
		return nil, fmt.Errorf("verifying teardown of %s: the sandbox was not closed", sb.id)
	}
	left := sb.cgroup.Leftovers()
	if _, err := os.Lstat(sb.state); err == nil {
		left = append(left, "sandbox folder "+sb.state+" still exists")
	}
	left = append(left, processesNaming(sb.state)...)
	links, err := sb.net.Leftovers()
	return append(left, links...), err
}

// processesNaming lists host processes whose command line contains s
// (every invocation of a sandbox names its folder).
func processesNaming(s string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, n := range names {
		pid := filepath.Base(filepath.Dir(n))
		if pid == self {
			continue
		}
		b := bounded.ReadFile(n, 4096)
		if !bytes.Contains(b, []byte(s)) {
			continue
		}
		out = append(out, fmt.Sprintf("process %s (%.120s) names the sandbox", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return out
}
