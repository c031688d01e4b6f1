package docker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/lease"
	"github.com/sandcheck/sandcheck/runners"
)

// LabelSandbox marks every container the runner creates.
const LabelSandbox = "sandcheck.sandbox"

// Start creates and starts one container and returns once the probe binary
// answers in it. It is bounded by spec.StartTimeout (60s when zero). Every
// error wraps runners.ErrStart; when the container was created, the error
// carries its state and last log lines, and the container is removed.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	name := containerName(spec.Name)
	sb, err := r.start(ctx, name, spec)
	if err != nil {
		return nil, fmt.Errorf("starting container %s: %w: %w", name, runners.ErrStart, err)
	}
	return sb, nil
}

func (r *Runner) start(ctx context.Context, name string, spec runners.SandboxSpec) (_ *Sandbox, err error) {
	if err := checkProbeDir(spec.ProbeDir); err != nil {
		return nil, err
	}
	network, err := r.cfg.networkMode(spec)
	if err != nil {
		return nil, err
	}
	hc, err := r.cfg.hostConfig(spec, network)
	if err != nil {
		return nil, err
	}
	env, err := r.cfg.env(spec)
	if err != nil {
		return nil, err
	}
	cli, err := engine(ctx)
	if err != nil {
		return nil, err
	}
	unconfined := unconfinedNetwork(ctx, cli, network, spec.Network)
	if unconfined && len(spec.Command) > 0 {
		// A task sandbox's first process is the probe itself.
		if err := checkNetworkArgv(spec.Command); err != nil {
			return nil, err
		}
	}
	// The engine creates from the ID that was checked: a missing image is
	// an error here, never a pull, and a moving tag cannot swap the image.
	id, err := imageID(ctx, cli, r.image)
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelSandbox] = "1"
	maps.Copy(labels, ownerLabels(r.maxLife))

	sb := &Sandbox{cli: cli, name: name, image: r.image, log: r.log.With("sandbox", name), unconfined: unconfined}
	entry := append([]string{probePath, "hold", "--max", r.maxLife.String()}, lease.HolderArgs(r.lease)...)
	task := len(spec.Command) > 0
	if task {
		// A task sandbox: its first process is the task, which may end at
		// once, so readiness is only "started" and Wait collects the rest.
		entry = spec.Command
	} else {
		// The holder ends once this process stops renewing the lease
		// (it died): Close releases it.
		if sb.release, err = lease.Keep(spec.ProbeDir, r.lease); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				sb.release()
			}
		}()
	}
	cfg := &container.Config{
		Image:      id,
		Labels:     labels,
		Entrypoint: entry,
		User:       r.cfg.User,
		Env:        env,
		Hostname:   spec.Hostname,
	}
	r.log.Debug("creating sandbox", "name", name, "image", r.image, "image_id", id, "runtime", r.cfg.Runtime, "network", network)
	if err := create(ctx, cli, sb, cfg, hc, network); err != nil {
		return nil, r.startFailed(ctx, cli, name, err)
	}
	if !task {
		if err := waitReady(ctx, cli, sb); err != nil {
			return nil, r.startFailed(ctx, cli, name, err)
		}
	}
	sb.recordLayout(ctx, cmp.Or(r.maxLife, oomWatchMax))
	r.log.Debug("sandbox ready", "name", name, "id", sb.id)
	return sb, nil
}

// create creates the container, checks what the engine made of the request
// and starts it, recording the ID in sb as soon as there is one.
func create(ctx context.Context, cli client.APIClient, sb *Sandbox, cfg *container.Config, hc *container.HostConfig, network string) error {
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: sb.name})
	if err != nil {
		return fmt.Errorf("creating the container: %w", err)
	}
	sb.id = res.ID
	for _, w := range res.Warnings {
		sb.log.Debug("engine warning on create", "warning", w)
	}
	if err := checkCreated(ctx, cli, res.ID, network); err != nil {
		return err
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting the container: %w", err)
	}
	return nil
}

// startFailed describes and removes a container that did not become ready.
// It works by name, so it also finds a container whose creation answer was
// lost, and on a fresh context, so a cancelled or timed-out start still
// cleans up.
func (r *Runner) startFailed(ctx context.Context, cli client.APIClient, name string, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := cause
	if detail := describe(dctx, cli, name); detail != "" {
		err = fmt.Errorf("%w (%s)", cause, detail)
	}
	var id string
	if res, ierr := cli.ContainerInspect(dctx, name, client.ContainerInspectOptions{}); ierr == nil {
		id = res.Container.ID
	}
	if rerr := remove(dctx, cli, name); rerr != nil {
		r.log.Warn("removing a sandbox that did not start", "name", name, "err", rerr)
		err = errors.Join(err, rerr)
	}
	if id != "" {
		reaped, left := reapRuntime(dctx, id)
		if len(reaped) > 0 {
			r.log.Warn("killed runtime processes a failed start left behind", "name", name, "processes", reaped)
		}
		if len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("runtime processes of %s survive its removal: %s", name, strings.Join(left, "; ")))
		}
	}
	return err
}

// checkCreated refuses a container that is not what was asked for: host
// port bindings (for ports the image exposes, say), and networks other than
// the one asked for. The request sets neither; the check keeps it so should
// the engine or a plugin add them on its own.
func checkCreated(ctx context.Context, cli client.APIClient, id, network string) error {
	res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspecting the new container: %w", err)
	}
	c := res.Container
	if c.HostConfig == nil || string(c.HostConfig.NetworkMode) != network {
		return fmt.Errorf("the new container is not in network %s", network)
	}
	if c.HostConfig.PublishAllPorts {
		return errors.New("the new container publishes all its exposed ports on the host; refusing")
	}
	if network != "none" && len(c.HostConfig.PortBindings) > 0 {
		ports := make([]string, 0, len(c.HostConfig.PortBindings))
		for p := range c.HostConfig.PortBindings {
			ports = append(ports, p.String())
		}
		return fmt.Errorf("the engine published ports %v on the host; refusing", ports)
	}
	if c.NetworkSettings != nil {
		for n := range c.NetworkSettings.Networks {
			if n != network {
				return fmt.Errorf("the new container was also attached to network %s; refusing", n)
			}
		}
	}
	return nil
}

// probePath is the probe binary inside a sandbox.
const probePath = runners.ProbeMount + "/" + runners.ProbeBinary

// checkProbeDir makes a missing or unusable probe binary a clear error rather
// than a runtime failure inside the container.
func checkProbeDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("probe folder %q is not an absolute path", dir)
	}
	p := filepath.Join(dir, runners.ProbeBinary)
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("probe binary: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("probe binary %s is not an executable regular file", p)
	}
	return nil
}

// containerName makes a unique Docker container name from the spec's name.
func containerName(name string) string {
	var b strings.Builder
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	s := strings.Trim(b.String(), "-._")
	if s == "" {
		return "sandcheck-" + hex.EncodeToString(suffix[:])
	}
	return "sandcheck-" + s + "-" + hex.EncodeToString(suffix[:])
}

// oomWatchMax bounds a sandbox's OOM watch when its holder has no bound but
// its lease: the watch ends with the container's cgroup or at Close anyway.
const oomWatchMax = 24 * time.Hour

// cleanupTimeout bounds removal and diagnosis on a fresh context.
const cleanupTimeout = 30 * time.Second
