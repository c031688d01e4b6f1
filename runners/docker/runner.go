package docker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sandcheck/sandcheck/internal/lease"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.Sandbox          = (*Sandbox)(nil)
	_ runners.Inspector        = (*Sandbox)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
	_ runners.Waiter           = (*Sandbox)(nil)
)

// DefaultLease is how long a sandbox's PID 1 (the probe's idle holder)
// holds once the run that made it stops renewing its lease (internal/lease:
// the run's process rewrites it every DefaultLease/8 while it lives), unless
// WithLease says otherwise. A live run keeps its sandboxes however long it
// runs; a killed run's end within minutes even if its reaper died with it.
const DefaultLease = lease.TTL

// unownedAge is how old a sandbox without an owner label (from a build
// before owners were recorded, whose holders had a 2 h bound) must be for a
// sweep to remove it.
const unownedAge = 2 * time.Hour

// defaultStartTimeout bounds Start when the spec gives no StartTimeout.
const defaultStartTimeout = 60 * time.Second

// Runner starts docker sandboxes for one target: one image, one docker
// configuration. It is safe for concurrent use.
type Runner struct {
	image   string
	cfg     settings
	log     *slog.Logger
	maxLife time.Duration // 0: no bound but the lease's
	lease   time.Duration
	digest  string // the image digest Open resolved
	// unconfined is set by Open when the target's network may reach past
	// the harness's addresses (host, Docker's bridge, a network not marked
	// internal): the runner then lacks the "network" capability, so the
	// engine leaves network probes not-tested instead of running them.
	unconfined bool
}

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(r *Runner) {
		if l != nil {
			r.log = l
		}
	}
}

// WithMaxLifetime bounds how long each sandbox's PID 1 holds whatever its
// lease (passed to `sandcheck-probe hold --max`, and as LabelDeadline, past
// which a sweep removes the sandbox even while its run lives). Zero or
// negative, the default, sets no bound but the lease's.
func WithMaxLifetime(d time.Duration) Option {
	return func(r *Runner) {
		r.maxLife = max(d, 0)
	}
}

// WithLease sets how long a sandbox's PID 1 holds once its run stops
// renewing its lease. Zero or negative keeps DefaultLease.
func WithLease(d time.Duration) Option {
	return func(r *Runner) {
		if d > 0 {
			r.lease = d
		}
	}
}

// New checks the docker configuration and returns a runner for image. It does
// not contact the engine; Start does (see Ping to check the engine early).
func New(cfg targets.Docker, image string, opts ...Option) (*Runner, error) {
	if err := checkImageRef(image); err != nil {
		return nil, err
	}
	s, err := newSettings(cfg)
	if err != nil {
		return nil, fmt.Errorf("docker configuration: %w", err)
	}
	r := &Runner{
		image: image,
		cfg:   s,
		log:   slog.New(slog.DiscardHandler),
		lease: DefaultLease,
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Name identifies the backend.
func (r *Runner) Name() string { return "docker" }

// HostCPUClock reports whether the runtime's tasks keep the host kernel's
// CPU clock: runc's do, gVisor's sentry keeps its own
// (runners.HostCPUClocker).
func (r *Runner) HostCPUClock() bool { return r.cfg.Runtime == "runc" }

// Capabilities of docker sandboxes: they join the harness network when the
// target's network is "harness", the engine describes them, and the probe
// binary is bind-mounted read-only.
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Network: !r.unconfined, Inspect: true, ProbeDelivery: true,
		TaskLaunch: true, HostPID: true, CPUMeter: true, Residue: true}
}
