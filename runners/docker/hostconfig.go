package docker

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/sandcheck/sandcheck/runners"
)

// Container logs are bounded on the host: PID 1 is the probe's sleeper, but
// anything in the box that can write to its stdout could otherwise fill the
// host's disk.
var logConfig = container.LogConfig{
	Type:   "json-file",
	Config: map[string]string{"max-size": "1m", "max-file": "1"},
}

// networkMode is the Docker network a sandbox joins: none, the harness
// network named by the spec, or the network the target names.
func (s settings) networkMode(spec runners.SandboxSpec) (string, error) {
	switch s.Network {
	case "none":
		return "none", nil
	case "harness":
		if spec.Network == "" {
			return "", errors.New("the target uses the harness network but the harness gave none")
		}
		if !networkPattern.MatchString(spec.Network) {
			return "", fmt.Errorf("harness network %q is not a Docker network name", spec.Network)
		}
		return spec.Network, nil
	default:
		return s.Network, nil
	}
}

// hostConfig is the whole HostConfig of one sandbox.
func (s settings) hostConfig(spec runners.SandboxSpec, network string) (*container.HostConfig, error) {
	dns := make([]netip.Addr, 0, len(spec.DNS))
	for _, d := range spec.DNS {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return nil, fmt.Errorf("dns server %q: %w", d, err)
		}
		dns = append(dns, a)
	}
	hc := &container.HostConfig{
		Runtime:        s.Runtime,
		NetworkMode:    container.NetworkMode(network),
		DNS:            dns,
		CapAdd:         slices.Clone(s.CapAdd),
		CapDrop:        slices.Clone(s.CapDrop),
		SecurityOpt:    slices.Clone(s.securityOpt),
		ReadonlyRootfs: s.ReadOnlyRootfs,
		Tmpfs:          maps.Clone(s.tmpfs),
		LogConfig:      logConfig,
		Resources: container.Resources{
			Memory: s.memory,
			// Equal to Memory so swap does not extend the limit.
			MemorySwap: s.memory,
			NanoCPUs:   int64(s.CPUs * 1e9),
		},
		ShmSize: s.shmSize,
	}
	for _, u := range s.Ulimits {
		hc.Resources.Ulimits = append(hc.Resources.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	if s.unmaskPaths {
		// What the docker CLI sends for --security-opt systempaths=unconfined:
		// empty, not absent, lists (the engine does not know the option).
		hc.MaskedPaths, hc.ReadonlyPaths = []string{}, []string{}
	}
	if s.PID == "host" {
		hc.PidMode = container.PidMode("host")
	}
	for _, d := range s.Devices {
		hc.Devices = append(hc.Devices, container.DeviceMapping{
			PathOnHost: d.Source, PathInContainer: d.Target, CgroupPermissions: d.Permissions,
		})
	}
	if s.PidsLimit > 0 {
		hc.PidsLimit = &s.PidsLimit
	}
	hc.Mounts = append(hc.Mounts, mount.Mount{
		Type: mount.TypeBind, Source: spec.ProbeDir, Target: runners.ProbeMount, ReadOnly: true,
	})
	for _, m := range s.Mounts {
		// A bind mount, whatever the source is: a folder, a file or the
		// engine's socket.
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
		})
	}
	s.applyHost(hc)
	return hc, nil
}

// applyHost maps the target's DockerHost settings onto the HostConfig, each
// to the field of the same meaning.
func (s settings) applyHost(hc *container.HostConfig) {
	h := s.DockerHost
	hc.Privileged = h.Privileged
	hc.IpcMode = container.IpcMode(h.IPC)
	hc.UTSMode = container.UTSMode(h.UTS)
	hc.CgroupnsMode = container.CgroupnsMode(h.Cgroupns)
	hc.UsernsMode = container.UsernsMode(h.Userns)
	hc.Sysctls = maps.Clone(h.Sysctls)
	hc.GroupAdd = slices.Clone(h.GroupAdd)
	hc.ExtraHosts = slices.Clone(h.ExtraHosts)
	hc.OomScoreAdj = h.OOMScoreAdj
	hc.Resources.CPUShares = h.CPUShares
	hc.Resources.CpusetCpus = h.CpusetCPUs
	if h.OOMKillDisable {
		hc.Resources.OomKillDisable = &h.OOMKillDisable
	}
	if h.Init {
		hc.Init = &h.Init
	}
	for _, v := range h.Volumes {
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: v.Name, Target: v.Target, ReadOnly: v.ReadOnly,
		})
	}
}

// env is the target's environment with the harness's on top, as Docker wants
// it, in a stable order.
func (s settings) env(spec runners.SandboxSpec) ([]string, error) {
	all := maps.Clone(s.Env)
	if all == nil {
		all = map[string]string{}
	}
	for k, v := range spec.Env {
		if !envNamePattern.MatchString(k) {
			return nil, fmt.Errorf("env name %q is not a variable name", k)
		}
		all[k] = v
	}
	out := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out, nil
}
