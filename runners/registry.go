package runners

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/targets"
)

// RunEnv is what the run prepared before it opens its runner: the run's own
// host folder and the target's settings resolved against it, plus what the
// harness itself adds to every sandbox.
type RunEnv struct {
	// RunDir is the run's host folder (probe copy, honey, shares).
	RunDir string
	// Mounts are the target's mounts with sources resolved to host paths,
	// followed by the harness's own (output bind, inputs folder).
	Mounts []targets.Mount
	// Tmpfs are tmpfs mounts the harness adds to the target's own (a gated
	// output folder).
	Tmpfs []targets.Tmpfs
	// Devices are the target's devices with sources resolved (the harness's
	// loop device in place of its placeholder).
	Devices []targets.Device
	// Env is the target's environment with the run's placeholders expanded.
	Env map[string]string
	// Expand expands the run's placeholders (${SANDCHECK_RUN_DIR},
	// ${SANDCHECK_SCOPED_KEY}) in a value a runner reads from the
	// platform's own files (a pod template's host paths and environment);
	// nil leaves values as they are.
	Expand func(string) string
	// Logger receives the runner's logs; nil discards.
	Logger *slog.Logger
}

// OpenFunc builds a runner for one target and run.
type OpenFunc func(ctx context.Context, tg *targets.Target, env RunEnv) (Runner, error)

// registry holds the backends by name. It is the one process-wide table of
// the harness, filled by each backend package's init and read-only after.
var registry = struct {
	sync.RWMutex
	open map[string]OpenFunc
}{open: map[string]OpenFunc{}}

// Register makes a backend available under name (the target's `runner:`).
// Registering one name twice panics: it is a programming error.
func Register(name string, open OpenFunc) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.open[name]; dup {
		panic("runners: backend " + name + " registered twice")
	}
	registry.open[name] = open
}

// Registered lists the backend names, sorted.
func Registered() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.open))
	for n := range registry.open {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open builds the runner the target names.
func Open(ctx context.Context, tg *targets.Target, env RunEnv) (Runner, error) {
	registry.RLock()
	open, ok := registry.open[tg.Runner]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("target %s: runner %q is not built into this sandcheck (known: %s)", tg.Path, tg.Runner, strings.Join(Registered(), ", "))
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := open(ctx, tg, env)
	if err != nil {
		return nil, fmt.Errorf("opening runner %s for target %s: %w", tg.Runner, tg.Path, err)
	}
	return r, nil
}
