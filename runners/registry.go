package runners

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	open    map[string]OpenFunc
	plugins map[string]Plugin
}{open: map[string]OpenFunc{}, plugins: map[string]Plugin{}}

// Plugin is one backend as a program builds it in: its name (the target's
// `runner:`, also the key of its section), the decoder of that section
// (its configuration type, checked once, there) and how a runner is
// opened for a target whose Section that decoder made.
type Plugin struct {
	// Name is the runner's name and its section's key.
	Name string
	// Decode decodes and validates the runner's section of a target file.
	Decode targets.SectionDecoder
	// Open builds a runner for one target and run; tg.Section is what
	// Decode returned.
	Open OpenFunc
	// Config is the section's configuration type, as a nil pointer of it:
	// the schema check reads its keys.
	Config targets.Section
	// Schema is the section's JSON Schema fragment: {"required": the
	// top-level keys a target of this runner needs, "$defs": the section's
	// definition under the runner's name and any of its own}. The target
	// schema holds it (policies/schema checks the two agree).
	Schema []byte
	// Sweep, when set, removes what the runner's sandboxes of dead runs
	// left on this host (see SweepFunc); sandcheck cleanup, the start of
	// every run and a dead run's reaper call it.
	Sweep SweepFunc
}

// SweepFunc removes what a runner's sandboxes of runs whose process is gone
// left on this host, found by the runner's own names only; with owner set
// (internal/owner's form) only that run's. It returns what it removed and
// what it kept because a live run holds it, and carries on past failures.
type SweepFunc func(ctx context.Context, owner string) (removed, kept []string, err error)

// Sweep runs every registered runner's SweepFunc, in name order.
func Sweep(ctx context.Context, owner string) (removed, kept []string, err error) {
	var errs []error
	for _, p := range Plugins() {
		if p.Sweep == nil {
			continue
		}
		r, k, err := p.Sweep(ctx, owner)
		removed, kept = append(removed, r...), append(kept, k...)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweeping %s sandboxes: %w", p.Name, err))
		}
	}
	return removed, kept, errors.Join(errs...)
}

// RegisterPlugin makes a backend and its section available under p.Name.
// Registering one name twice panics: it is a programming error.
func RegisterPlugin(p Plugin) {
	if p.Name == "" || p.Decode == nil || p.Open == nil || p.Config == nil || len(p.Schema) == 0 {
		panic("runners: plugin " + p.Name + " needs a name, a decoder, an opener, its configuration type and its schema")
	}
	targets.RegisterSection(p.Name, p.Decode)
	Register(p.Name, p.Open)
	registry.Lock()
	defer registry.Unlock()
	registry.plugins[p.Name] = p
}

// Plugins lists the backends that own their sections, sorted by name.
func Plugins() []Plugin {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Plugin, 0, len(registry.plugins))
	for _, n := range slices.Sorted(maps.Keys(registry.plugins)) {
		out = append(out, registry.plugins[n])
	}
	return out
}

// Register makes a backend available under name (the target's `runner:`)
// whose section package targets still decodes itself; a backend that owns
// its section registers through RegisterPlugin. Registering one name twice
// panics: it is a programming error.
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
