// Package doctor checks whether this machine can run sandcheck: the Docker
// engine and its runc and runsc runtimes, bubblewrap, root, the kernel's
// syscall tracepoints for the eBPF tracer, the cgroup version, the iptables
// chain the harness network uses, and the first-party runner image. Every
// check that is not ok carries a one-line fix.
//
// It backs `sandcheck doctor`. Like every library here it never prints; the
// caller decides how to show the checks.
package doctor

import (
	"context"
	"os"
	"os/exec"
	"time"
)

// Status is the verdict of one check.
type Status string

const (
	// OK means the requirement is met.
	OK Status = "ok"
	// Missing means the requirement is not met; what needs it fails or skips.
	Missing Status = "missing"
	// Warn means the requirement is met only in part, or doctor could not
	// tell (for example without root, or without the engine).
	Warn Status = "warn"
)

// Check is the result of one check.
type Check struct {
	// Name identifies the check; names are stable ("docker-engine").
	Name string `json:"name"`
	// Status is ok, missing or warn.
	Status Status `json:"status"`
	// Detail says what was found, in one line.
	Detail string `json:"detail"`
	// Fix says how to close the gap, in one line; empty when Status is ok.
	Fix string `json:"fix,omitempty"`
}

// RunnerImage is the first-party sandbox image the reference targets use,
// built by `make images` (scripts/build-images.sh).
const RunnerImage = "sandcheck/runner:dev"

// engineTimeout bounds each call to the Docker engine, so that a socket that
// accepts but never answers cannot hang the doctor.
const engineTimeout = 10 * time.Second

// Run checks this machine, in a fixed order, and returns one Check per
// requirement. It does not stop at the first gap.
func Run(ctx context.Context) []Check {
	sys := system{
		lookPath:    exec.LookPath,
		euid:        os.Geteuid(),
		root:        "/",
		chainExists: iptablesChainExists,
	}
	if eng, err := newMobyEngine(); err != nil {
		sys.engineErr = err
	} else {
		defer eng.Close()
		sys.engine = eng
	}
	return sys.run(ctx)
}

// system is everything the checks read from the machine, so that tests can
// replace each part.
type system struct {
	engine    engine // nil when no client could be made; engineErr says why
	engineErr error
	lookPath  func(file string) (string, error)
	euid      int
	// root prefixes every /proc and /sys path ("/" on the host).
	root string
	// chainExists reports whether an iptables chain exists in a table.
	chainExists func(table, chain string) (bool, error)
}

func (s system) run(ctx context.Context) []Check {
	info, infoErr := s.info(ctx)
	return []Check{
		checkEngine(s, info, infoErr),
		checkRuntime("runc", info, infoErr),
		checkRuntime("runsc", info, infoErr),
		checkBubblewrap(s),
		checkRoot(s),
		checkTracepoints(s),
		checkCgroup(s),
		checkDockerUserChain(s),
		checkRunnerImage(ctx, s, infoErr),
	}
}

func (s system) info(ctx context.Context) (engineInfo, error) {
	if s.engine == nil {
		return engineInfo{}, s.engineErr
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	return s.engine.Info(ctx)
}

// Needs says which of the machine's optional parts one target's run uses:
// its runner, and for the docker runner its OCI runtime and image.
type Needs struct {
	Runner  string // "docker", "bwrap", "process", …
	Runtime string // the docker target's runtime ("runc" when empty)
	Image   string // the docker target's image
}

// ForTarget narrows checks to what one target's run needs: a gap in a part
// the target does not use (runsc for a runc target, bubblewrap for a Docker
// target, the runner image for a target naming another image) becomes a
// warning naming the target, so doctor fails exactly where the run would.
func ForTarget(checks []Check, name string, n Needs) []Check {
	runtime := n.Runtime
	if runtime == "" {
		runtime = "runc"
	}
	used := func(check string) bool {
		switch check {
		case "runtime-runc", "runtime-runsc":
			return n.Runner == "docker" && check == "runtime-"+runtime
		case "bubblewrap":
			return n.Runner == "bwrap"
		case "runner-image":
			return n.Runner == "docker" && n.Image == RunnerImage
		}
		return true
	}
	out := make([]Check, 0, len(checks))
	for _, c := range checks {
		if c.Status == Missing && !used(c.Name) {
			c.Status = Warn
			c.Detail += " (not needed by target " + name + ")"
		}
		out = append(out, c)
	}
	return out
}
