package runners

import "context"

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
