// Package gateway is the gateway runner: it tests the sandboxes an
// agent-runtime gateway makes (the product document's API: substrates,
// spawn with a runtime profile and a substrate, shell tasks, forced delete)
// through that API, with a Bearer admin key read from the environment.
// With the target's host view it also makes the document's host-side
// proof: the instance's scoped key is nowhere in the box, the egress
// sidecar is the box's only way out, and the key stops working on delete.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

func init() { runners.Register("gateway", Open) }

var (
	_ runners.Runner           = (*Runner)(nil)
	_ runners.TeardownVerifier = (*Sandbox)(nil)
)

// Runner spawns gateway instances.
type Runner struct {
	cfg   targets.Gateway
	api   *client
	admin string
	log   *slog.Logger
	// spawnMu serializes spawns (see spawn).
	spawnMu sync.Mutex
}

// Open is the gateway backend's runners.OpenFunc: it reads the admin key
// from the variable the target names and checks the gateway offers the
// substrate.
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	if tg.Gateway == nil {
		return nil, fmt.Errorf("target %s has no gateway section", tg.Path)
	}
	if len(env.Mounts) > 0 || len(env.Devices) > 0 || len(env.Tmpfs) > 0 {
		return nil, fmt.Errorf("target %s: the gateway runner cannot mount host folders, devices or tmpfs into an instance (declare no inputs, bind output or mounts)", tg.Path)
	}
	key := os.Getenv(tg.Gateway.AdminKeyEnv)
	if key == "" {
		return nil, fmt.Errorf("target %s: the admin key variable %s is not set", tg.Path, tg.Gateway.AdminKeyEnv)
	}
	r := New(*tg.Gateway, key, env.Logger)
	if err := r.checkSubstrate(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// New builds a runner for a validated gateway section and its admin key.
func New(cfg targets.Gateway, adminKey string, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Substrate == "" {
		cfg.Substrate = "opensandbox"
	}
	if cfg.AgentType == "" {
		cfg.AgentType = "chat"
	}
	if cfg.Capability == "" {
		cfg.Capability = "chat"
	}
	return &Runner{cfg: cfg, admin: adminKey, log: log,
		api: &client{base: strings.TrimSuffix(cfg.URL, "/"), http: &http.Client{}, timeout: cfg.GatewayTimeout()}}
}

// Name implements runners.Runner.
func (r *Runner) Name() string { return "gateway" }

// Capabilities implements runners.Runner: an instance is reached only
// through the API, on a network the gateway chose, so no harness network
// and no runtime view.
func (r *Runner) Capabilities() runners.Capabilities { return runners.Capabilities{} }

func (r *Runner) checkSubstrate(ctx context.Context) error {
	var out struct {
		Substrates []string `json:"substrates"`
	}
	if _, err := r.api.call(ctx, http.MethodGet, "/v1/runtime/substrates", r.admin, nil, &out, 0); err != nil {
		return err
	}
	if !slices.Contains(out.Substrates, r.cfg.Substrate) {
		return fmt.Errorf("GET /v1/runtime/substrates: substrate %q is not offered (offered: %v)", r.cfg.Substrate, out.Substrates)
	}
	return nil
}

// Start implements runners.Runner: spawn an instance, copy the probe
// folder in through tasks, check the probe answers. Whatever fails after
// the spawn deletes the instance.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	if spec.StartTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.StartTimeout)
		defer cancel()
	}
	var out struct {
		InstanceID string `json:"instance_id"`
		Substrate  string `json:"substrate"`
		State      string `json:"state"`
	}
	req := map[string]string{"profile": r.cfg.RuntimeProfile, "agent_type": r.cfg.AgentType, "substrate": r.cfg.Substrate}
	if err := r.spawn(ctx, req, &out); err != nil {
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	if !idPattern.MatchString(out.InstanceID) {
		return nil, fmt.Errorf("%w: POST /v1/runtime/agents: answer has no usable instance_id (got %q)", runners.ErrStart, truncate(out.InstanceID, 80))
	}
	s := &Sandbox{r: r, id: out.InstanceID, env: spec.Env}
	if out.Substrate != r.cfg.Substrate {
		return nil, s.failStart(fmt.Errorf("POST /v1/runtime/agents: instance runs on substrate %q, asked %q", out.Substrate, r.cfg.Substrate))
	}
	if out.State != "ready" {
		return nil, s.failStart(fmt.Errorf("POST /v1/runtime/agents: instance %s is %q, not ready", s.id, out.State))
	}
	if r.cfg.Host != nil {
		s.host = newHostView(r.cfg.Host, s.id)
		if err := s.host.before(ctx); err != nil {
			return nil, s.failStart(err)
		}
	}
	if err := s.deliver(ctx, spec.ProbeDir); err != nil {
		return nil, s.failStart(err)
	}
	return s, nil
}

// failStart deletes an instance whose start failed.
func (s *Sandbox) failStart(err error) error {
	if cerr := s.Close(context.Background()); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%w: instance %s: %w", runners.ErrStart, s.id, err)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// spawn makes one instance. Spawns are serialized, so that when the answer
// cannot be used (an error, a timeout, malformed JSON) the host view can
// name the boxes that appeared during the call: the runner deletes them
// through the API and names them in the error, so a failed spawn leaves
// nothing it made. (On a gateway shared with others, a box another client
// spawned in the same moment would be caught too; the error names every
// instance deleted.)
func (r *Runner) spawn(ctx context.Context, req map[string]string, out any) error {
	r.spawnMu.Lock()
	defer r.spawnMu.Unlock()
	var before map[string]bool
	if r.cfg.Host != nil {
		var err error
		if before, err = boxIDs(ctx, r.cfg.Host); err != nil {
			return fmt.Errorf("host view: listing boxes before the spawn: %w", err)
		}
	}
	_, err := r.api.call(ctx, http.MethodPost, "/v1/runtime/agents", r.admin, req, out, 0)
	if err == nil || before == nil {
		return err
	}
	dctx := context.WithoutCancel(ctx)
	after, lerr := boxIDs(dctx, r.cfg.Host)
	if lerr != nil {
		return errors.Join(err, fmt.Errorf("host view: listing boxes after the failed spawn: %w", lerr))
	}
	var deleted []string
	for id := range after {
		if before[id] {
			continue
		}
		if _, derr := r.api.call(dctx, http.MethodDelete, "/v1/runtime/agents/"+id+"?force=true", r.admin, nil, nil, 0); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting instance %s the failed spawn made: %w", id, derr))
			continue
		}
		deleted = append(deleted, id)
	}
	if len(deleted) > 0 {
		slices.Sort(deleted)
		err = fmt.Errorf("%w (deleted instance(s) %s, which appeared during the call)", err, strings.Join(deleted, ", "))
	}
	return err
}
