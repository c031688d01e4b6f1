package docker

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The docker runner registers itself under the target's `runner: docker`;
// importing this package (the CLI does) is what builds it in.
func init() { runners.Register("docker", Open) }

var (
	_ runners.ImageResolver      = (*Runner)(nil)
	_ runners.HarnessNetworkUser = (*Runner)(nil)
	_ runners.HostPIDer          = (*Sandbox)(nil)
	_ runners.SeccompCounter     = (*Sandbox)(nil)
)

// Open is the docker backend's runners.OpenFunc: it checks that the engine
// answers and that the image is present, resolves the image's digest and
// builds the container configuration from the target's docker section and
// what the run prepared (resolved mounts and devices, the harness's own
// mounts, the expanded environment, a seccomp profile relative to the
// target file).
func Open(ctx context.Context, tg *targets.Target, env runners.RunEnv) (runners.Runner, error) {
	if tg.Docker == nil {
		return nil, fmt.Errorf("target %s has no docker section", tg.Path)
	}
	if err := Ping(ctx); err != nil {
		return nil, err
	}
	digest, err := ImageDigest(ctx, tg.Image)
	if err != nil {
		return nil, err
	}
	dcfg := *tg.Docker
	dcfg.Mounts = env.Mounts
	dcfg.Devices = env.Devices
	if len(env.Tmpfs) > 0 {
		dcfg.Tmpfs = append(append([]targets.Tmpfs(nil), dcfg.Tmpfs...), env.Tmpfs...)
	}
	dcfg.Env = env.Env
	if dcfg.Seccomp != "" && dcfg.Seccomp != "default" && dcfg.Seccomp != "unconfined" && !filepath.IsAbs(dcfg.Seccomp) {
		if dcfg.Seccomp, err = filepath.Abs(filepath.Join(filepath.Dir(tg.Path), dcfg.Seccomp)); err != nil {
			return nil, fmt.Errorf("seccomp profile of %s: %w", tg.Path, err)
		}
	}
	r, err := New(dcfg, tg.Image, WithLogger(env.Logger))
	if err != nil {
		return nil, err
	}
	r.digest = digest
	confined, err := NetworkConfined(ctx, tg.Docker.Network)
	if err != nil {
		return nil, fmt.Errorf("target %s: judging network %q: %w", tg.Path, tg.Docker.Network, err)
	}
	r.unconfined = !confined
	if env.RunDir != "" {
		// A sweep by a later run knows at once when this process is gone.
		if err := MarkRunDir(env.RunDir); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ImageDigest is the digest of the image the runner starts, resolved when
// it was opened (New alone leaves it empty and asks the engine).
func (r *Runner) ImageDigest(ctx context.Context) (string, error) {
	if r.digest != "" {
		return r.digest, nil
	}
	return ImageDigest(ctx, r.image)
}

// UsesHarnessNetwork reports whether the target's network is the harness's.
func (r *Runner) UsesHarnessNetwork() bool { return r.cfg.Network == "harness" }

// NetworkAPI is the engine client the harness network is created with: the
// docker runner's sandboxes join a Docker bridge network.
func (r *Runner) NetworkAPI(ctx context.Context) (client.NetworkAPIClient, error) {
	return Client(ctx)
}

// HostPID is the host PID of the container's init, as the engine reports it.
func (s *Sandbox) HostPID(ctx context.Context) (int, error) {
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspecting %s for its pid: %w", s.id, err)
	}
	if res.Container.State == nil || res.Container.State.Pid <= 0 {
		return 0, fmt.Errorf("sandbox %s has no running init", s.id)
	}
	return res.Container.State.Pid, nil
}

// SeccompFilters is the filters the engine's runtime puts on each process
// of the container, from the engine's own configuration of it: none for a
// privileged container or seccomp=unconfined, else the one filter runc (or
// crun, youki) compiles the profile into. Other runtimes (runsc, kata) keep
// their own processes on the host, with filters of their own: not said.
func (s *Sandbox) SeccompFilters(ctx context.Context) (int, bool, error) {
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, false, fmt.Errorf("inspecting %s for its seccomp profile: %w", s.id, err)
	}
	hc := res.Container.HostConfig
	if hc == nil {
		return 0, false, nil
	}
	switch hc.Runtime {
	case "", "runc", "crun", "youki":
	default:
		return 0, false, nil
	}
	if runtimeView(res.Container, s.image).Seccomp == "unconfined" {
		return 0, true, nil
	}
	return 1, true, nil
}
