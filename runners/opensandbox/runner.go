// Package opensandbox is the runner for OpenSandbox
// (opensandbox-group/OpenSandbox): it tests sandboxes exactly as the
// platform spawns them, through its own APIs. The lifecycle API
// (sandbox-lifecycle.yml) creates the sandbox (202), is polled until it is
// Running, names execd's endpoint with the headers to send, and deletes it
// (204); execd's API (execd-api.yaml) runs commands (the bare-JSON event
// stream, the exit code from the CommandExecError event) and uploads the
// probe binary. Image, resource limits and network policy come from the
// target file; the API key from the environment variable the target names.
package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The runner registers itself under the target's `runner: opensandbox`.
func init() { runners.Register("opensandbox", Open) }

// ExecdPort is where execd listens inside every sandbox.
const ExecdPort = 44772

// defaultEntrypoint is the official SDK's default first process.
var defaultEntrypoint = []string{"tail", "-f", "/dev/null"}

// defaultStartTimeout bounds Start when the spec names no bound.
const defaultStartTimeout = 2 * time.Minute

// closeTimeout bounds Close (delete, then waiting for the sandbox to go).
const closeTimeout = 90 * time.Second

// DefaultResourceLimits are the create request's resourceLimits when the
// target names no resources: the official Go SDK's DefaultResourceLimits
// (sdks/sandbox/go/constants.go 58-61), since upstream refuses a create
// without any.
var DefaultResourceLimits = map[string]string{"cpu": "1", "memory": "2Gi"}

// nameKey is the metadata key holding the sandbox's name, by which a start
// that lost its answer finds what it created.
const nameKey = "sandcheck.name"

// Runner starts OpenSandbox sandboxes through one lifecycle server.
type Runner struct {
	cfg   targets.OpenSandbox
	image string
	api   *client
	http  *http.Client
	log   *slog.Logger
	peers peers
}

// Open is the backend's runners.OpenFunc: it reads the API key from the
// variable the target names (an unset or empty variable is an error) and
// checks that the server answers GET /health.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	if tg.OpenSandbox == nil {
		return nil, fmt.Errorf("target %s has no opensandbox section", tg.Path)
	}
	key := ""
	if name := tg.OpenSandbox.APIKeyEnv; name != "" {
		if key = os.Getenv(name); key == "" {
			return nil, fmt.Errorf("target %s: the API key variable %s is unset or empty", tg.Path, name)
		}
	}
	r, err := New(*tg.OpenSandbox, tg.Image, key, env.Logger)
	if err != nil {
		return nil, err
	}
	if tg.OpenSandbox.Resources == nil {
		r.log.Warn("the target names no opensandbox resources: every create asks for the official SDK's default resourceLimits",
			"cpu", DefaultResourceLimits["cpu"], "memory", DefaultResourceLimits["memory"])
	}
	if err := r.Health(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// New builds a runner for one server; key is the API key ("" sends none).
func New(cfg targets.OpenSandbox, image, key string, log *slog.Logger) (*Runner, error) {
	if cfg.URL == "" || image == "" {
		return nil, errors.New("opensandbox runner: the server URL and the image are required")
	}
	if probs := CheckMetadata(cfg.Metadata); len(probs) > 0 {
		return nil, fmt.Errorf("opensandbox runner: the server would refuse the target's metadata: %s", strings.Join(probs, "; "))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Transport: &http.Transport{
		Proxy:                 nil, // the platform's API is reached directly, never through a sandbox's proxy settings
		ResponseHeaderTimeout: cfg.CallTimeout(),
		MaxIdleConnsPerHost:   8,
	}}
	return &Runner{cfg: cfg, image: image, http: hc, log: log,
		api: &client{base: strings.TrimRight(cfg.URL, "/"), key: key, http: hc, timeout: cfg.CallTimeout()}}, nil
}

// Name is "opensandbox".
func (r *Runner) Name() string { return "opensandbox" }

// Capabilities: the platform's APIs offer no host view, no harness network,
// no task launch, no host PID, no CPU meter and no residue search, so probes
// needing those are not tested, with the reason.
func (r *Runner) Capabilities() runners.Capabilities { return runners.Capabilities{} }

// Health calls GET /health at the server's root, which needs no key:
// upstream serves it there only, not under the /v1 base of the other calls
// (server main.py 151-158, 189), so a URL ending in /v1 loses that segment.
func (r *Runner) Health(ctx context.Context) error {
	return r.api.callURL(ctx, http.MethodGet, healthURL(r.api.base), "GET /health", nil, nil, http.StatusOK)
}

// healthURL is GET /health's address for a lifecycle base URL: the base
// without its trailing /v1 (a prefix before it, as a gateway mounts the
// server under, stays).
func healthURL(base string) string {
	return strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1") + "/health"
}

// request is the create request for one sandbox.
func (r *Runner) request(spec runners.SandboxSpec) createRequest {
	req := createRequest{Image: map[string]string{"uri": r.image}, Entrypoint: r.cfg.Entrypoint}
	if len(req.Entrypoint) == 0 {
		req.Entrypoint = defaultEntrypoint
	}
	// No lifetime is sent as none, not as null, which Kubernetes providers
	// may refuse (server api/schema.py 413-421).
	if r.cfg.Timeout > 0 {
		t := r.cfg.Timeout
		req.Timeout = &t
	}
	// Upstream requires resourceLimits at create (server api/schema.py
	// 519-520, a 422 without it); a target naming none gets the official
	// SDK's default, as an SDK caller would.
	req.ResourceLimits = maps.Clone(DefaultResourceLimits)
	if rs := r.cfg.Resources; rs != nil {
		req.ResourceLimits = map[string]string{}
		if rs.CPU != "" {
			req.ResourceLimits["cpu"] = rs.CPU
		}
		if rs.Memory != "" {
			req.ResourceLimits["memory"] = rs.Memory
		}
	}
	req.Env = maps.Clone(r.cfg.Env)
	if len(spec.Env) > 0 && req.Env == nil {
		req.Env = map[string]string{}
	}
	maps.Copy(req.Env, spec.Env)
	// The harness's own labels are made label values (upstream refuses
	// metadata that breaks Kubernetes label rules with a 400); the target's
	// were checked when the runner was built.
	req.Metadata = maps.Clone(r.cfg.Metadata)
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	for k, v := range spec.Labels {
		req.Metadata[k] = asLabelValue(v)
	}
	req.Metadata[nameKey] = asLabelValue(spec.Name)
	if p := r.cfg.NetworkPolicy; p != nil {
		req.NetworkPolicy = &networkPolicy{DefaultAction: p.DefaultAction, Egress: []egressRule{}}
		for _, e := range p.Egress {
			req.NetworkPolicy.Egress = append(req.NetworkPolicy.Egress, egressRule{Action: e.Action, Target: e.Target})
		}
	}
	return req
}

// Start creates a sandbox, waits until it is Running, looks up execd's
// endpoint and uploads the probe binary to runners.ProbeMount. Any failure
// wraps runners.ErrStart and deletes what the call created (found by its
// name in the metadata when the create answer was lost).
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	bound := spec.StartTimeout
	if bound <= 0 {
		bound = defaultStartTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	t0 := time.Now()
	sb, err := r.launch(sctx, ctx, spec, bound)
	if err != nil {
		return nil, err
	}
	probe := spec.ProbeDir + "/" + runners.ProbeBinary
	if err := sb.execd.upload(sctx, probe, runners.ProbeMount+"/"+runners.ProbeBinary, 0o755); err != nil {
		return nil, sb.failStart(ctx, err)
	}
	r.log.Debug("sandbox running", "id", sb.id, "seconds", time.Since(t0).Seconds())
	return sb, nil
}

// launch creates a sandbox through the lifecycle API, waits until it is
// Running, looks up execd's endpoint and waits until execd answers there
// (upstream's Running comes before execd is up; sctx bounds the start, ctx the
// cleanup of a failed one).
func (r *Runner) launch(sctx, ctx context.Context, spec runners.SandboxSpec, bound time.Duration) (*Sandbox, error) {
	info, err := r.api.create(sctx, r.request(spec))
	if err != nil {
		r.sweep(ctx, spec.Name)
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	sb := &Sandbox{id: info.ID, name: spec.Name, api: r.api, log: r.log}
	if err := r.waitRunning(sctx, info.ID, bound); err != nil {
		return nil, sb.failStart(ctx, err)
	}
	ep, err := r.api.endpoint(sctx, info.ID, ExecdPort)
	if err != nil {
		return nil, sb.failStart(ctx, err)
	}
	pe, err := parseEndpoint(ep.Endpoint, schemeOf(r.cfg.URL))
	if err != nil {
		return nil, sb.failStart(ctx, err)
	}
	sb.execd = &execd{base: pe.base, headers: ep.Headers, http: r.http}
	sb.Endpoint, sb.endpoint = ep.Endpoint, pe
	if err := sb.execd.waitReady(sctx); err != nil {
		return nil, sb.failStart(ctx, err)
	}
	return sb, nil
}

// failStart deletes a sandbox whose start failed and says why, wrapping
// runners.ErrStart.
func (s *Sandbox) failStart(ctx context.Context, err error) error {
	if cerr := s.Close(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%w: sandbox %s: %w", runners.ErrStart, s.id, err)
}

// waitRunning polls GET /sandboxes/{id} until the sandbox is Running; Failed
// or Terminated end the wait, unknown states are waited through.
func (r *Runner) waitRunning(ctx context.Context, id string, bound time.Duration) error {
	last := ""
	for {
		info, err := r.api.get(ctx, id)
		if err != nil {
			return err
		}
		switch info.Status.State {
		case "Running":
			return nil
		case "Failed", "Terminated":
			return fmt.Errorf("the sandbox is %s: %s %s", info.Status.State, info.Status.Reason, info.Status.Message)
		}
		last = info.Status.State
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sandbox was still %s after %s: %w", last, bound, ctx.Err())
		case <-time.After(r.cfg.PollEvery()):
		}
	}
}

// sweep deletes the sandboxes named name: a create whose answer was lost
// (a timeout, a broken body) may still have made one.
func (r *Runner) sweep(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	ids, err := r.api.listByMetadata(ctx, nameKey, asLabelValue(name))
	if err != nil {
		r.log.Warn("listing sandboxes after a failed create", "name", name, "err", err)
		return
	}
	for _, id := range ids {
		sb := &Sandbox{id: id, name: name, api: r.api, log: r.log}
		if err := sb.Close(ctx); err != nil {
			r.log.Warn("deleting a sandbox after a failed create", "id", id, "err", err)
		}
	}
}
