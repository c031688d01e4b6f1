package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

// The bwrap runner registers itself, and its section, under the target's
// `runner: bwrap`.
func init() {
	runners.RegisterPlugin(runners.Plugin{Name: "bwrap", Decode: Decode, Open: Open, Config: (*Config)(nil), Schema: schema, Sweep: Sweep})
}

var (
	_ runners.HarnessNetworkUser = (*Runner)(nil)
	_ runners.HostPIDer          = (*Sandbox)(nil)
	_ runners.SeccompCounter     = (*Sandbox)(nil)
	_ netharness.Joiner          = (*Runner)(nil)
)

// Open is the bwrap backend's runners.OpenFunc: the target's bwrap section
// with what the run prepared added (its resolved mounts as binds, each
// target path once, the
// harness's tmpfs mounts, the expanded environment). Devices cannot be put
// into a bwrap sandbox by this runner: a run that prepared some is refused.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	sec, ok := tg.Section.(*Config)
	if !ok {
		return nil, fmt.Errorf("target %s has no bwrap section", tg.Path)
	}
	if len(env.Devices) > 0 {
		return nil, errors.New("the bwrap runner cannot put devices into a sandbox")
	}
	cfg := *sec
	base := filepath.Dir(tg.Path)
	var binds []targets.Mount
	for _, m := range cfg.Binds {
		src, err := resolveSource(m.Source, base, env.RunDir)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", tg.Path, err)
		}
		m.Source = src
		binds = append(binds, m)
	}
	// The run's resolved mounts hold the target's binds too (the engine
	// plants honeyfiles in them); each target path is bound once.
	for _, m := range env.Mounts {
		if !slices.ContainsFunc(binds, func(b targets.Mount) bool { return b.Target == m.Target }) {
			binds = append(binds, m)
		}
	}
	cfg.Binds = binds
	cfg.Tmpfs = append(append([]targets.Tmpfs(nil), cfg.Tmpfs...), env.Tmpfs...)
	if env.Env != nil {
		cfg.Env = env.Env
	}
	return New(cfg, base, WithLogger(env.Logger))
}

// resolveSource expands ${SANDCHECK_RUN_DIR} to the run's folder and
// makes a relative source absolute against the target file's folder. A
// missing source is made only inside the run's folder.
func resolveSource(src, base, runDir string) (string, error) {
	if runDir != "" {
		src = strings.ReplaceAll(src, "${SANDCHECK_RUN_DIR}", runDir)
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(base, src)
	}
	src = filepath.Clean(src)
	if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
		rel, rerr := filepath.Rel(runDir, src)
		if runDir == "" || rerr != nil || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("bind source %s does not exist", src)
		}
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", fmt.Errorf("creating bind source %s: %w", src, err)
		}
	}
	return src, nil
}

// UsesHarnessNetwork reports whether the target's network is the harness's.
func (r *Runner) UsesHarnessNetwork() bool { return r.cfg.Network == "harness" }

// HostPID is the host PID of the sandbox's first process (bwrap's init in
// the sandbox's PID namespace, or the command itself without one).
func (sb *Sandbox) HostPID(ctx context.Context) (int, error) {
	if err := sb.Running(); err != nil {
		return 0, err
	}
	return sb.childPID, nil
}

// SeccompFilters is the filters on each process of the sandbox: those the
// harness itself runs under (bwrap and everything it starts inherit them)
// and the one bwrap --seccomp loads when the target has a profile.
func (sb *Sandbox) SeccompFilters(ctx context.Context) (int, bool, error) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false, fmt.Errorf("reading the harness's own seccomp filters: %w", err)
	}
	own, err := strconv.Atoi(statusFields(string(st))["Seccomp_filters"])
	if err != nil {
		return 0, false, nil // a kernel without the field: not said
	}
	if sb.r.seccomp != nil {
		own++
	}
	return own, true, nil
}

// Sweep is the bwrap runner's runners.SweepFunc: it removes the sandboxes
// of dead runs under StateRoot, with their cgroups, what still runs in
// them and the binds under their state folders (process.SweepSandboxes).
func Sweep(_ context.Context, only string) (removed, kept []string, err error) {
	return process.SweepSandboxes(StateRoot, idPrefix, only)
}
