package runners

import (
	"context"

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

// ParamsFiller is implemented by runners whose platform has addresses of its
// own that probes are about (the kubernetes runner: the cluster's API server
// and kubelets, as the cluster names them).
type ParamsFiller interface {
	// FillParams sets the platform's fields of a probe invocation's
	// parameters.
	FillParams(p *probes.Params)
}
