package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// Inspect returns the engine's own view of the container. Capabilities are
// given without the CAP_ prefix, as target files write them; a custom
// seccomp profile appears in SecurityOpt as its digest, not its text;
// ImageDigest is the image ID the container runs; Env holds names only.
func (s *Sandbox) Inspect(ctx context.Context) (runners.RuntimeView, error) {
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return runners.RuntimeView{}, fmt.Errorf("inspecting container %s: %w", s.id, err)
	}
	v := runtimeView(res.Container, s.image)
	if len(s.submounts) > 0 {
		v.Mounts = append(v.Mounts, s.submounts...)
		slices.SortStableFunc(v.Mounts, func(a, b runners.Mount) int { return strings.Compare(a.Destination, b.Destination) })
	}
	if v.State != "" && v.State != "running" && !v.OOMKilled && s.oom != nil {
		// Only once the sandbox is over: an earlier exec's OOM victim in a
		// live sandbox must not settle a later probe. The cgroup goes away
		// just after the exit; wait briefly for the watch to see that.
		s.oom.Settle(2 * time.Second)
		v.OOMKilled = s.oom.Seen()
	}
	return v, nil
}

// runtimeView maps an engine inspection to the runner-neutral view.
func runtimeView(c container.InspectResponse, image string) runners.RuntimeView {
	v := runners.RuntimeView{Image: image, ImageDigest: c.Image}
	if st := c.State; st != nil {
		v.State, v.ExitCode, v.OOMKilled = string(st.Status), st.ExitCode, st.OOMKilled
	}
	if cfg := c.Config; cfg != nil {
		v.User = cfg.User
		v.Env = envNames(cfg.Env)
		v.Hostname = cfg.Hostname
		v.Labels = maps.Clone(cfg.Labels)
	} else {
		v.Unknown = append(v.Unknown, "user", "env_names")
	}
	hc := c.HostConfig
	if hc == nil {
		v.Unknown = append(v.Unknown, "host_config")
		return v
	}
	v.Runtime = hc.Runtime
	v.Privileged = hc.Privileged
	v.CapAdd = capNames(hc.CapAdd)
	v.CapDrop = capNames(hc.CapDrop)
	v.ReadOnlyRootfs = hc.ReadonlyRootfs
	v.MaskedPaths = slices.Clone(hc.MaskedPaths)
	v.NetworkMode = string(hc.NetworkMode)
	if hc.PidsLimit != nil {
		v.PidsLimit = *hc.PidsLimit
	}
	v.MemoryBytes = hc.Memory
	v.NanoCPUs = hc.NanoCPUs
	v.Seccomp = "default"
	for _, o := range hc.SecurityOpt {
		key, val, _ := strings.Cut(o, "=")
		if key == o && strings.Contains(o, ":") {
			key, val, _ = strings.Cut(o, ":") // the old separator
		}
		switch {
		case key == "seccomp" && val == "unconfined":
			v.Seccomp = "unconfined"
		case key == "seccomp":
			v.Seccomp = "custom"
			sum := sha256.Sum256([]byte(val))
			o = "seccomp=custom:sha256:" + hex.EncodeToString(sum[:])
		case key == "no-new-privileges":
			v.NoNewPrivileges = val == "" || val == "true"
		}
		v.SecurityOpt = append(v.SecurityOpt, o)
	}
	if hc.Privileged {
		v.Seccomp = "unconfined" // the engine applies no profile to privileged containers
	}
	v.Mounts = mounts(c.Mounts, hc.Tmpfs)
	return v
}

// mounts merges the engine's mount points with the tmpfs mounts it lists only
// in the host configuration, sorted by destination.
func mounts(points []container.MountPoint, tmpfs map[string]string) []runners.Mount {
	var out []runners.Mount
	for _, m := range points {
		out = append(out, runners.Mount{Type: string(m.Type), Source: m.Source, Destination: m.Destination, ReadOnly: !m.RW})
	}
	for dst, opts := range tmpfs {
		out = append(out, runners.Mount{Type: "tmpfs", Destination: dst, ReadOnly: slices.Contains(strings.Split(opts, ","), "ro")})
	}
	slices.SortFunc(out, func(a, b runners.Mount) int { return strings.Compare(a.Destination, b.Destination) })
	return out
}

// envNames keeps the names of "NAME=value" entries, never the values.
func envNames(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// capNames drops the CAP_ prefix the engine may store.
func capNames(caps []string) []string {
	if caps == nil {
		return nil
	}
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = strings.TrimPrefix(strings.ToUpper(c), "CAP_")
	}
	return out
}
