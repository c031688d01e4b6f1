// Package command is the command runner: it drives any platform through
// its own command-line tool, from argv templates in the target (create a
// sandbox and print its ID, run a command in it, copy a file in, destroy
// it). The probe binary is copied in; the sandbox's network reaches the
// harness's canaries only when the target puts it on the harness network.
package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/docker"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

func init() { runners.Register("command", Open) }

var (
	_ runners.HarnessNetworkUser = (*Runner)(nil)
	_ runners.Runner             = (*Runner)(nil)
)

// Runner starts sandboxes by running the target's commands.
type Runner struct {
	cfg   targets.Command
	image string
	dir   string
	env   map[string]string
	log   *slog.Logger

	mu    sync.Mutex
	stuck error // set once the exec step is found hung (checkExec)
}

// execStuck is the error that found the exec step hung, or nil.
func (r *Runner) execStuck() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stuck
}

// setStuck records that the exec step is hung and returns the error every
// later Exec returns (the first one found).
func (r *Runner) setStuck(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stuck == nil {
		r.stuck = err
	}
	return r.stuck
}

// Open is the command backend's runners.OpenFunc.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	if tg.Command == nil {
		return nil, fmt.Errorf("target %s has no command section", tg.Path)
	}
	if len(env.Mounts) > 0 || len(env.Devices) > 0 || len(env.Tmpfs) > 0 {
		return nil, fmt.Errorf("target %s: the command runner cannot mount host folders, devices or tmpfs into a platform's sandbox (declare no inputs, bind output or mounts)", tg.Path)
	}
	if err := tg.CheckPrograms(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(tg.Path))
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", tg.Path, err)
	}
	r, err := New(*tg.Command, tg.Image, env.Logger)
	if err != nil {
		return nil, err
	}
	r.dir = dir
	if env.Env != nil {
		r.env = env.Env // the target's environment, the run's placeholders expanded
	}
	return r, nil
}

// New builds a command runner from a validated command section.
func New(cfg targets.Command, image string, log *slog.Logger) (*Runner, error) {
	if _, err := exec.LookPath(cfg.Create[0]); err != nil {
		return nil, fmt.Errorf("command create: program %q: %w", cfg.Create[0], err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, image: image, env: cfg.Env, log: log}, nil
}

// Name implements runners.Runner.
func (r *Runner) Name() string { return "command" }

// Capabilities implements runners.Runner: the network only when the
// platform puts its sandboxes on the harness network; nothing of the
// host's view (a platform's sandbox is known only through its tool).
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: r.cfg.Network == "harness"}
}

// UsesHarnessNetwork implements runners.HarnessNetworkUser.
func (r *Runner) UsesHarnessNetwork() bool { return r.cfg.Network == "harness" }

// NetworkAPI is the engine client the harness network is made with: a
// platform on the harness network is one on this machine's Docker engine.
func (r *Runner) NetworkAPI(ctx context.Context) (client.NetworkAPIClient, error) {
	return docker.Client(ctx)
}

// run runs one step's argv, bounded by ctx, output capped.
func run(ctx context.Context, step string, argv []string) (runners.ExitResult, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	res, err := process.Run(ctx, cmd)
	if err != nil {
		return res, fmt.Errorf("command %s (%s): %w", step, argv[0], err)
	}
	return res, nil
}

// stepErr describes a step that exited non-zero, with a bounded excerpt of
// its standard error.
func stepErr(step string, argv []string, res runners.ExitResult) error {
	msg := strings.TrimSpace(string(res.Stderr))
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	return fmt.Errorf("command %s (%s) exited %d: %s", step, argv[0], res.ExitCode, msg)
}

// Start implements runners.Runner: create, copy the probe folder's files
// in, and check the probe binary answers.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	if err := r.execStuck(); err != nil {
		// No probe could run in it: make nothing, say why once.
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	timeout := r.cfg.CommandTimeout()
	if spec.StartTimeout > 0 {
		timeout = spec.StartTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env := map[string]string{}
	for k, v := range r.env {
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	ea, err := envArgs(r.cfg.EnvArg, env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	dns := ""
	if len(spec.DNS) > 0 {
		dns = spec.DNS[0]
	}
	argv, err := expand("create", r.cfg.Create, vars{
		one: map[string]string{"NAME": spec.Name, "IMAGE": r.image, "NETWORK": spec.Network,
			"DNS": dns, "HOSTNAME": hostnameOr(spec), "TARGET_DIR": r.dir},
		splat: map[string][]string{"ENV_ARGS": ea},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	t0 := time.Now()
	res, err := run(sctx, "create", argv)
	if err == nil && res.ExitCode != 0 {
		err = stepErr("create", argv, res)
	}
	id := lastLine(res.Stdout)
	if err == nil && !idPattern.MatchString(id) {
		err = fmt.Errorf("command create (%s) printed no sandbox ID as its last line (got %q)", argv[0], truncate(id, 80))
	}
	if err != nil {
		// A create that timed out or failed may still have made a sandbox
		// under its name: remove it by name when the target can.
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, errors.Join(err, r.destroyByName(ctx, spec.Name)))
	}
	s := &Sandbox{r: r, id: id, env: ea}
	r.log.Debug("created", "sandbox", id, "seconds", time.Since(t0).Seconds())
	if err := s.deliver(sctx, spec.ProbeDir); err != nil {
		return nil, s.failStart(err)
	}
	if len(r.cfg.List) > 0 {
		return listedSandbox{s}, nil
	}
	return s, nil
}

func hostnameOr(spec runners.SandboxSpec) string {
	if spec.Hostname != "" {
		return spec.Hostname
	}
	return truncate(strings.ToLower(spec.Name), 63)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// destroyByName runs the target's destroy_by_name step after a failed
// create; without one it says a sandbox may be left.
func (r *Runner) destroyByName(ctx context.Context, name string) error {
	if len(r.cfg.DestroyByName) == 0 {
		return fmt.Errorf("a sandbox named %s may be left on the platform (the target gives no destroy_by_name step)", name)
	}
	argv, err := expand("destroy_by_name", r.cfg.DestroyByName, vars{one: map[string]string{"NAME": name}})
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CommandTimeout())
	defer cancel()
	res, err := run(dctx, "destroy_by_name", argv)
	if err == nil && res.ExitCode != 0 {
		err = stepErr("destroy_by_name", argv, res)
	}
	return err
}
