// Package runners defines how sandcheck starts sandboxes: the Runner and
// Sandbox interfaces every backend implements, and the optional interfaces a
// backend may add (host-side inspection, teardown verification).
package runners

import (
	"context"
	"errors"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// Runner starts sandboxes the way a platform does.
type Runner interface {
	// Name identifies the backend ("docker").
	Name() string
	// Capabilities says what sandboxes from this runner can do; a probe that
	// needs a missing capability is skipped with a reason, never failed.
	Capabilities() Capabilities
	// Start creates and starts one sandbox and returns once commands can run
	// in it.
	Start(ctx context.Context, spec SandboxSpec) (Sandbox, error)
}

// Sandbox is one running sandbox.
type Sandbox interface {
	// ID is the backend's identifier (a container ID).
	ID() string
	// CopyIn copies a host file into the sandbox.
	CopyIn(ctx context.Context, hostPath, sandboxPath string) error
	// Exec runs argv inside the sandbox and waits for it; output is capped
	// (see ExitResult). A non-zero exit is not an error.
	Exec(ctx context.Context, argv []string) (ExitResult, error)
	// Close kills and removes the sandbox; calling it twice is safe.
	Close(ctx context.Context) error
}

// Inspector is implemented by sandboxes whose runtime can describe them from
// the host (the engine's own view: capabilities, mounts, limits...).
type Inspector interface {
	// Inspect returns the runtime's view of the sandbox.
	Inspect(ctx context.Context) (RuntimeView, error)
}

// Waiter is implemented by sandboxes started with a Command: the sandbox's
// first process is the task, as on platforms that start one sandbox per task.
type Waiter interface {
	// Wait waits for the first process to end and returns its exit code and
	// output, capped like Exec's.
	Wait(ctx context.Context) (ExitResult, error)
}

// TeardownVerifier is implemented by sandboxes that can prove, after Close,
// that nothing of them remains on the host.
type TeardownVerifier interface {
	// VerifyTeardown lists what survived Close; empty means clean.
	VerifyTeardown(ctx context.Context) ([]string, error)
}

// ResidueFinder is implemented by sandboxes that can search the host, after
// Close, for what code inside planted to outlive them, marked with a token
// (the teardown probes). It removes what it finds, so the host is left as
// it was.
type ResidueFinder interface {
	// FindResidue looks for things of the given kinds (ResidueKinds) that
	// carry token and returns one finding per kind; calling it before Close
	// is an error.
	FindResidue(ctx context.Context, token string, kinds []string) ([]Residue, error)
}

// CPUMeter is implemented by sandboxes whose CPU use the host can read and
// cut short: a platform's CPU budget, enforced from outside the box.
type CPUMeter interface {
	// CPUUsed is the CPU time the sandbox's host tasks have used so far
	// (its cgroup's accounting; under gVisor the sentry's, which runs the
	// workload).
	CPUUsed() (time.Duration, error)
	// Kill stops every process of the sandbox at once; Close still
	// removes it.
	Kill(ctx context.Context) error
}

// ResidueKinds are the kinds of host state a ResidueFinder looks through.
var ResidueKinds = []string{"processes", "cgroups", "mounts", "scratch", "network", "container"}

// Residue is what one teardown check found on the host.
type Residue struct {
	// Kind is one of ResidueKinds.
	Kind string
	// Checked says what was looked through.
	Checked string
	// Found lists what survived, one line each; empty means nothing did.
	Found []string
	// Failed says why the check could not look (then Found means nothing).
	Failed string
}

// Capabilities of a runner's sandboxes. Each field is one word of the
// closed vocabulary a probe's `needs:` names (see Needs); a probe whose needs
// the runner lacks is not tested, with the reason, never failed or passed.
type Capabilities struct {
	// Network: sandboxes can be attached to the harness network ("network").
	Network bool
	// Inspect: sandboxes implement Inspector ("inspect").
	Inspect bool
	// ProbeDelivery: the runner can deliver the probe binary read-only.
	ProbeDelivery bool
	// TaskLaunch: a task can be a fresh sandbox's first process (Waiter,
	// "task-launch").
	TaskLaunch bool
	// HostPID: the host can name the sandbox's init (HostPIDer, "host-pid").
	HostPID bool
	// CPUMeter: the host can read and cut the sandbox's CPU use (CPUMeter,
	// "cpu-meter").
	CPUMeter bool
	// Residue: the host can search for what outlived a sandbox
	// (ResidueFinder, "residue").
	Residue bool
}

// The closed vocabulary of runner capabilities a probe may need.
const (
	NeedNetwork    = "network"
	NeedInspect    = "inspect"
	NeedTaskLaunch = "task-launch"
	NeedHostPID    = "host-pid"
	NeedCPUMeter   = "cpu-meter"
	NeedResidue    = "residue"
)

// Needs lists the capability words a probe may need, in a fixed order.
var Needs = []string{NeedNetwork, NeedInspect, NeedTaskLaunch, NeedHostPID, NeedCPUMeter, NeedResidue}

// Has reports whether the capabilities include need; an unknown word is
// never had.
func (c Capabilities) Has(need string) bool {
	switch need {
	case NeedNetwork:
		return c.Network
	case NeedInspect:
		return c.Inspect
	case NeedTaskLaunch:
		return c.TaskLaunch
	case NeedHostPID:
		return c.HostPID
	case NeedCPUMeter:
		return c.CPUMeter
	case NeedResidue:
		return c.Residue
	}
	return false
}

// Missing lists the needs the capabilities lack, in the order given.
func (c Capabilities) Missing(needs []string) []string {
	var out []string
	for _, n := range needs {
		if !c.Has(n) {
			out = append(out, n)
		}
	}
	return out
}

// SandboxSpec is what the harness asks of one sandbox. Backend-specific
// settings come from the target file and are given to the runner's
// constructor, not here.
type SandboxSpec struct {
	// Name is a human-readable name, unique within the run.
	Name string
	// Labels attribute the sandbox to run, target and task.
	Labels map[string]string
	// ProbeDir is a host directory holding the probe binary; the runner makes
	// it available read-only at ProbeMount inside the sandbox.
	ProbeDir string
	// Network is the harness network to attach to ("" = as the target says).
	Network string
	// DNS is the resolver the sandbox must use (the harness's own).
	DNS []string
	// Env is added to the target's environment.
	Env map[string]string
	// StartTimeout bounds Start.
	StartTimeout time.Duration
	// Hostname is the sandbox's host name ("" lets the runtime pick one).
	Hostname string
	// Command, when set, is the sandbox's first process (the task itself)
	// instead of the probe binary's idle holder; Start returns once it runs
	// and the sandbox implements Waiter.
	Command []string
	// Watch, when set, is called by a runner whose commands are host
	// process trees of their own in the host's pid namespace (a
	// TreeExecer's) with the host pid of Command's root process, held
	// before anything of the command has run; the command runs once Watch
	// returns. Other runners never call it.
	Watch func(pid int)
}

// ProbeMount is where the probe directory appears inside a sandbox.
const ProbeMount = probes.ProbeMount

// GoAheadDir is the folder of ProbeDir where the harness creates a task's
// go-ahead file once it watches the sandbox (sandcheck-probe run --go-ahead).
const GoAheadDir = probes.GoAheadDir

// ProbeBinary is the probe binary's file name inside ProbeDir.
const ProbeBinary = probes.ProbeBinary

// MaxOutput caps each of stdout and stderr kept from one Exec.
const MaxOutput = 256 << 10

// ExitResult is what one Exec produced.
type ExitResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// Truncated is set when output went past MaxOutput and was cut.
	Truncated bool
	Duration  time.Duration
}

// RuntimeView is the runtime's own description of a sandbox, as the host sees
// it. Fields the runtime cannot tell are left zero and listed in Unknown.
type RuntimeView struct {
	Runtime         string   `json:"runtime"`
	Privileged      bool     `json:"privileged"`
	User            string   `json:"user"`
	CapAdd          []string `json:"cap_add"`
	CapDrop         []string `json:"cap_drop"`
	SecurityOpt     []string `json:"security_opt"`
	Seccomp         string   `json:"seccomp"` // default, unconfined, custom
	NoNewPrivileges bool     `json:"no_new_privileges"`
	ReadOnlyRootfs  bool     `json:"read_only_rootfs"`
	MaskedPaths     []string `json:"masked_paths"`
	Mounts          []Mount  `json:"mounts"`
	NetworkMode     string   `json:"network_mode"`
	PidsLimit       int64    `json:"pids_limit"`
	MemoryBytes     int64    `json:"memory_bytes"`
	NanoCPUs        int64    `json:"nano_cpus"`
	Env             []string `json:"env_names"` // names only, never values
	Image           string   `json:"image"`
	ImageDigest     string   `json:"image_digest"`
	// Hostname and Labels are the identity the runtime gave the sandbox: its
	// host name, and every label on it (the harness's and the platform's).
	Hostname string            `json:"hostname,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// State, ExitCode and OOMKilled describe the sandbox's first process
	// when the view was taken (a finished task sandbox has exited).
	State     string   `json:"state"`
	ExitCode  int      `json:"exit_code"`
	OOMKilled bool     `json:"oom_killed"`
	Unknown   []string `json:"unknown,omitempty"`
}

// Mount is one mount as the runtime reports it.
type Mount struct {
	Type        string `json:"type"` // bind, volume, tmpfs
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only"`
}

// ErrStart means the sandbox never became ready (bad image, runtime failure,
// start timeout); it is a harness error, not a finding.
var ErrStart = errors.New("sandbox did not start")

// ErrExecStuck means the runner's way of running commands in its sandboxes
// has stopped answering (a platform tool's exec that outlives the probe's
// bound and then does not run even the probe binary's list): a harness
// error, never a probe's outcome.
var ErrExecStuck = errors.New("the runner cannot run commands in its sandboxes")
