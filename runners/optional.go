package runners

import (
	"context"
	"net"

	"github.com/sandcheck/sandcheck/probes"
)

// The optional interfaces below are discovered by type assertion: a backend
// implements those it can honour and nothing else, so the engine never calls
// a stub.

// ImageResolver is implemented by runners that can name the exact image
// their sandboxes run (a content digest), for the record.
type ImageResolver interface {
	// ImageDigest is the digest of the image the runner starts.
	ImageDigest(ctx context.Context) (string, error)
}

// HarnessNetworkUser is implemented by runners whose target puts sandboxes
// on the harness network (the bridge the harness makes and fences).
type HarnessNetworkUser interface {
	// UsesHarnessNetwork reports whether the harness must create its
	// network for this run.
	UsesHarnessNetwork() bool
}

// HostPIDer is implemented by sandboxes whose first process the host can
// name (for the eBPF tracer's cgroup and PID-namespace scope).
type HostPIDer interface {
	// HostPID is the host PID of the sandbox's init.
	HostPID(ctx context.Context) (int, error)
}

// TreeExecer is implemented by sandboxes each of whose commands is a host
// process tree of its own in the host's pid namespace, with no process of
// the sandbox between commands to watch it by (a wrapper's invocations,
// each forking into namespaces it makes itself): the host's tracer follows
// each command from its root, which the runner holds until the tracer
// watches it (a task's too: SandboxSpec.Watch).
type TreeExecer interface {
	// ExecTree is Exec whose command's root process is held, before
	// anything of the command has run, until watch (given the root's host
	// pid) returns.
	ExecTree(ctx context.Context, argv []string, watch func(pid int)) (ExitResult, error)
}

// SeccompCounter is implemented by sandboxes whose runner can say, from its
// own configuration and the runtime's (never from the box), how many
// seccomp filters the runtime puts on each process of the sandbox. The
// host holds every process of the box to it: a process with more filters
// installed its own, and the kernel's refusals after that are the box's,
// not the sandbox's.
type SeccompCounter interface {
	// SeccompFilters is the most filters the runtime puts on any one
	// process of the sandbox; ok is false when the runner cannot say (a
	// runtime whose own host processes carry filters of their own, as
	// gVisor's sentry does).
	SeccompFilters(ctx context.Context) (n int, ok bool, err error)
}

// PlatformPeers is implemented by runners that make, through the platform's
// own API, what some probes aim at beside their sandbox (a neighbour
// sandbox, a canary the sandbox reaches by IP literal). The engine calls
// Prepare once before the first probe with the run's selection, FillParams
// for every probe invocation, and ClosePeers once when the run ends, also
// after a failed Prepare.
type PlatformPeers interface {
	// Prepare makes what the selected probes need; an error is the
	// platform's and ends the run as a harness error.
	Prepare(ctx context.Context, selected []probes.Spec) error
	// ParamsFiller adds the peers' addresses to a probe's parameters.
	ParamsFiller
	// ClosePeers removes what Prepare made; calling it twice is safe.
	ClosePeers(ctx context.Context) error
}

// HostChecker is implemented by sandboxes whose platform the host can check
// for a named fact the box cannot see and the runtime view does not carry
// (the catalog's host: runtime:<check>, e.g. execd-published: on which host addresses the
// platform published the sandbox's execd port).
type HostChecker interface {
	// HostCheck checks one fact; an error means the check could not be made.
	HostCheck(ctx context.Context, check string) (HostFinding, error)
}

// HostFinding is what one host check found.
type HostFinding struct {
	// Indicates is escaped or blocked where the fact alone settles the
	// probe, empty when it only informs.
	Indicates probes.Outcome
	// Summary says what the host saw, in one sentence.
	Summary string
	// Data are the facts behind it.
	Data map[string]string
}

// ParamsFiller is implemented by runners whose platform has addresses of its
// own that probes are about (the kubernetes runner: the cluster's API server
// and kubelets, as the cluster names them).
type ParamsFiller interface {
	// FillParams sets the platform's fields of a probe invocation's
	// parameters.
	FillParams(p *probes.Params)
}

// HostCPUClocker is implemented by runners that can say whether their
// tasks' CPU clocks are the host kernel's own accounting (runc, bwrap, a
// host process), which never counts more for a task than for the sandbox
// cgroup holding it, whatever else the host runs; a user-space kernel
// (gVisor's sentry) keeps clocks of its own, which a busy host lets run
// ahead of its cgroup's.
type HostCPUClocker interface {
	// HostCPUClock reports whether a task's CPU time is what the host
	// kernel counts for it.
	HostCPUClock() bool
}

// OOMCounter is implemented by sandboxes whose memory cgroup the host can
// read: how many processes the kernel's OOM killer has killed in it so far
// (cgroup v1 memory.oom_control oom_kill, v2 memory.events oom_kill). A
// count that grew across a command says the kernel stopped part of it at
// the sandbox's memory limit, which the command's own exit (137, no
// output) cannot tell apart from any SIGKILL.
type OOMCounter interface {
	OOMKills() (uint64, error)
}

// KilledError is what a sandbox's Exec returns when the platform killed the
// whole sandbox under the command (a platform whose memory limit takes the
// box's own agent with it): the platform's account of the death, and
// whether it names its memory limit. The engine makes it the probe's
// outcome, contained by the platform, and gives the next probes a fresh
// sandbox; it is no harness error.
type KilledError struct {
	// Account is the platform's own words ("Failed: OOMKilled ...").
	Account string
	// OOM says the platform killed it at its memory limit.
	OOM bool
}

func (e *KilledError) Error() string {
	return "the platform killed the sandbox under the command: " + e.Account
}

// NetNSDialer is implemented by sandboxes whose network namespace the host
// can enter (a host process of the sandbox lives in it): a connection the
// host dials there starts where the sandbox's own would, through its
// routes and the rules that filter them, but not through anything the box
// does to itself in-process (its seccomp filter, a wrapper's proxy).
type NetNSDialer interface {
	// DialFromSandbox opens a connection to addr (an address literal and
	// port) over network with d, from inside the sandbox's network
	// namespace; an error that is no dial error (net.OpError) means the
	// namespace could not be entered.
	DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error)
}
