package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// idPattern is what a sandbox ID printed by create may look like: it
// becomes a word of later commands, so nothing a shell or a flag parser
// could take for more.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$`)

// Sandbox is one sandbox the platform's tool made.
type Sandbox struct {
	r    *Runner
	id   string
	env  []string
	once sync.Once
	err  error
}

// ID implements runners.Sandbox: the ID create printed.
func (s *Sandbox) ID() string { return s.id }

// deliver copies the probe folder's regular files to runners.ProbeMount and
// checks the probe binary runs (its command list).
func (s *Sandbox) deliver(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading probe folder: %w", err)
	}
	found := false
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		found = found || e.Name() == runners.ProbeBinary
		if err := s.CopyIn(ctx, filepath.Join(dir, e.Name()), path.Join(runners.ProbeMount, e.Name())); err != nil {
			return fmt.Errorf("copying the probe folder in: %w", err)
		}
	}
	if !found {
		return fmt.Errorf("probe folder %s holds no %s", dir, runners.ProbeBinary)
	}
	res, err := s.Exec(ctx, listArgv)
	if err != nil {
		return fmt.Errorf("checking the probe binary answers: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the probe binary did not answer in sandbox %s: exit %d: %s", s.id, res.ExitCode, truncate(string(res.Stderr), 300))
	}
	return nil
}

// failStart destroys a sandbox whose start failed and returns the start
// error (joined with the destroy's, if any).
func (s *Sandbox) failStart(err error) error {
	if cerr := s.Close(context.Background()); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%w: sandbox %s: %w", runners.ErrStart, s.id, err)
}

// CopyIn implements runners.Sandbox through the copy_in command.
func (s *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	if _, err := os.Stat(hostPath); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	argv, err := expand("copy_in", s.r.cfg.CopyIn, vars{one: map[string]string{"ID": s.id, "SRC": hostPath, "DST": sandboxPath}})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.r.cfg.CommandTimeout())
	defer cancel()
	res, err := run(cctx, "copy_in", argv)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return stepErr("copy_in", argv, res)
	}
	return nil
}

// Exec implements runners.Sandbox through the exec command: the tool's exit
// code is taken for the command's (the tool must pass it through).
func (s *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	full, err := expand("exec", s.r.cfg.Exec, vars{
		one:   map[string]string{"ID": s.id, "ARGV_SHELL": runners.ShellQuote(argv)},
		splat: map[string][]string{"ARGV": argv, "ENV_ARGS": s.env},
	})
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, err
	}
	if err := s.r.execStuck(); err != nil {
		return runners.ExitResult{ExitCode: -1}, err
	}
	t0 := time.Now()
	res, err := run(ctx, "exec", full)
	res.Duration = time.Since(t0)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The exec outlived its bound: the probe may have hung inside
		// (its outcome is inconclusive), or the platform's exec step may
		// have (then no probe can run: a harness error).
		if serr := s.checkExec(ctx, full[0], res.Duration); serr != nil {
			return res, serr
		}
	}
	return res, err
}

// checkExec tells a probe that hung from an exec step that did: after an
// exec cut at its bound it runs the probe binary's list through the same
// step, bounded by the target's timeout (at most liveBound). When that does
// not return either, the step is stuck: every later Exec of the runner fails
// at once with the same error, so a run reports one cause, not one timeout
// per probe.
func (s *Sandbox) checkExec(ctx context.Context, program string, took time.Duration) error {
	bound := min(s.r.cfg.CommandTimeout(), liveBound)
	full, err := expand("exec", s.r.cfg.Exec, vars{
		one:   map[string]string{"ID": s.id, "ARGV_SHELL": runners.ShellQuote(listArgv)},
		splat: map[string][]string{"ARGV": listArgv, "ENV_ARGS": s.env},
	})
	if err != nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	_, err = run(lctx, "exec", full)
	if err == nil || lctx.Err() == nil {
		return nil // it answered (whatever it said): the probe hung, not the step
	}
	return s.r.setStuck(fmt.Errorf("%w: command exec (%s) did not return within %s for a probe, nor within %s for %q in sandbox %s: the platform's exec step is hung",
		runners.ErrExecStuck, program, took.Round(time.Second), bound, strings.Join(listArgv, " "), s.id))
}

// liveBound is the longest checkExec waits for the probe binary's list.
const liveBound = 30 * time.Second

// listArgv is the probe binary's quickest command, the one Start checks.
var listArgv = []string{runners.ProbeMount + "/" + runners.ProbeBinary, "list"}

// Close implements runners.Sandbox through the destroy command; a second
// call returns the first's result. It is bounded by the target's timeout,
// not by ctx, so a cancelled run still destroys what it made.
func (s *Sandbox) Close(ctx context.Context) error {
	s.once.Do(func() {
		argv, err := expand("destroy", s.r.cfg.Destroy, vars{one: map[string]string{"ID": s.id}})
		if err != nil {
			s.err = err
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.r.cfg.CommandTimeout())
		defer cancel()
		res, err := run(dctx, "destroy", argv)
		if err == nil && res.ExitCode != 0 {
			err = stepErr("destroy", argv, res)
		}
		if err != nil {
			s.err = fmt.Errorf("destroying sandbox %s: %w", s.id, err)
		}
	})
	return s.err
}

// listedSandbox is a sandbox of a target that declares a list step: the
// host can then check that destroy really removed it.
type listedSandbox struct{ *Sandbox }

var _ runners.TeardownVerifier = listedSandbox{}

// Bounds of the check that a destroyed sandbox is no longer listed: a
// platform may report it for a moment after destroy returns.
const (
	goneTries = 5
	goneBound = 20 * time.Second
)

// VerifyTeardown implements runners.TeardownVerifier: after Close, the
// target's list step must stop naming the sandbox within goneTries calls
// and min(timeout, goneBound). Still listed is a leftover (the platform's
// destroy returned before the sandbox was gone); a list that fails is a
// check that could not be made.
func (s listedSandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	bound := min(s.r.cfg.CommandTimeout(), goneBound)
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	t0 := time.Now()
	delay := 200 * time.Millisecond
	for try := 1; ; try++ {
		ids, err := s.r.List(vctx)
		if err != nil {
			return nil, fmt.Errorf("listing the platform's sandboxes after destroying %s: %w", s.id, err)
		}
		if !slices.Contains(ids, s.id) {
			return nil, nil
		}
		if try == goneTries || time.Until(deadline(vctx)) < delay {
			return []string{fmt.Sprintf("sandbox %s (still listed by the target's list step %d times over %s after destroy returned)",
				s.id, try, time.Since(t0).Round(100*time.Millisecond))}, nil
		}
		select {
		case <-vctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 4*time.Second)
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// List runs the target's list command and returns the live sandbox IDs it
// printed; an error when the target has none.
func (r *Runner) List(ctx context.Context) ([]string, error) {
	if len(r.cfg.List) == 0 {
		return nil, errors.New("the target gives no list command")
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CommandTimeout())
	defer cancel()
	res, err := run(cctx, "list", r.cfg.List)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, stepErr("list", r.cfg.List, res)
	}
	var ids []string
	for _, l := range regexp.MustCompile(`\s+`).Split(string(res.Stdout), -1) {
		if l != "" {
			ids = append(ids, l)
		}
	}
	return ids, nil
}

// Spawn starts argv in the sandbox as user through the target's spawn
// step, with env added to the sandbox's own, and returns once the step
// has (the step must not wait for argv, e.g. docker exec --detach).
func (s *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(s.r.cfg.Spawn) == 0 {
		return errors.New("the target gives no spawn step (command.spawn) to start a process beside the task")
	}
	extra := map[string]string{}
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok {
			extra[k] = v
		}
	}
	ea, err := envArgs(s.r.cfg.EnvArg, extra)
	if err != nil {
		return err
	}
	full, err := expand("spawn", s.r.cfg.Spawn, vars{
		one:   map[string]string{"ID": s.id, "USER": user, "ARGV_SHELL": runners.ShellQuote(argv)},
		splat: map[string][]string{"ARGV": argv, "ENV_ARGS": append(append([]string(nil), s.env...), ea...)},
	})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.r.cfg.CommandTimeout())
	defer cancel()
	res, err := run(cctx, "spawn", full)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return stepErr("spawn", full, res)
	}
	return nil
}
