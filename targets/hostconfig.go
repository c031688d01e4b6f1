package targets

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
)

// DockerHost are the rest of Docker's host configuration a platform may set
// on its sandboxes, careless settings included: a harness that cannot
// describe a dangerous configuration cannot flag it. Each maps to the
// HostConfig field of the same meaning (runners/docker).
type DockerHost struct {
	// Privileged gives the sandbox every capability, every device and no
	// seccomp or AppArmor profile (`docker run --privileged`).
	Privileged bool `yaml:"privileged,omitempty"`
	// IPC is the IPC namespace: empty (the engine's default), private,
	// shareable, none or host.
	IPC string `yaml:"ipc,omitempty"`
	// UTS is the UTS namespace: empty (its own) or host.
	UTS string `yaml:"uts,omitempty"`
	// Cgroupns is the cgroup namespace: empty (the engine's default),
	// private or host.
	Cgroupns string `yaml:"cgroupns,omitempty"`
	// Userns is the user namespace mode: empty (the engine's default, which
	// follows the daemon's userns-remap) or host.
	Userns string `yaml:"userns,omitempty"`
	// Sysctls are namespaced kernel parameters set in the sandbox
	// (`--sysctl`).
	Sysctls map[string]string `yaml:"sysctls,omitempty"`
	// GroupAdd are supplementary groups of the workload, names or IDs
	// (`--group-add`).
	GroupAdd []string `yaml:"group_add,omitempty"`
	// Volumes are named Docker volumes mounted into the sandbox; a volume
	// shared between sandboxes carries data from one task to the next.
	Volumes []Volume `yaml:"volumes,omitempty"`
	// ExtraHosts are added to /etc/hosts: "name:address" (`--add-host`).
	ExtraHosts []string `yaml:"extra_hosts,omitempty"`
	// OOMKillDisable keeps the kernel's OOM killer off the sandbox.
	OOMKillDisable bool `yaml:"oom_kill_disable,omitempty"`
	// OOMScoreAdj biases the OOM killer (-1000 to 1000).
	OOMScoreAdj int `yaml:"oom_score_adj,omitempty"`
	// CPUShares is the relative CPU weight (0: the engine's default).
	CPUShares int64 `yaml:"cpu_shares,omitempty"`
	// CpusetCPUs pins the sandbox to CPUs, e.g. "0-1".
	CpusetCPUs string `yaml:"cpuset_cpus,omitempty"`
	// Init runs an init process (tini) as PID 1.
	Init bool `yaml:"init,omitempty"`
}

// Volume is one named Docker volume mount.
type Volume struct {
	// Name is the volume's name; it is created if missing, and kept.
	Name string `yaml:"name"`
	// Target is the path inside the sandbox.
	Target string `yaml:"target"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `yaml:"read_only,omitempty"`
}

var (
	sysctlPattern    = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`)
	groupPattern     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$|^[0-9]{1,10}$`)
	volumePattern    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)
	extraHostPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}:[0-9A-Fa-f.:\[\]]+$`)
	cpusetPattern    = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)
)

// checkDockerHost validates the DockerHost settings.
func (v *validator) checkDockerHost(d *Docker) {
	oneOf := func(path, val string, allowed ...string) {
		if val != "" && !slices.Contains(allowed, val) {
			v.add(path, "%q is not one of %v (or empty for the engine's default)", val, allowed)
		}
	}
	oneOf("$.docker.ipc", d.IPC, "private", "shareable", "none", "host")
	oneOf("$.docker.uts", d.UTS, "host")
	oneOf("$.docker.cgroupns", d.Cgroupns, "private", "host")
	oneOf("$.docker.userns", d.Userns, "host")
	keys := make([]string, 0, len(d.Sysctls))
	for k := range d.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !sysctlPattern.MatchString(k) {
			v.add("$.docker.sysctls."+k, "is not a sysctl name such as net.ipv4.ip_forward")
		}
	}
	for i, g := range d.GroupAdd {
		if !groupPattern.MatchString(g) {
			v.add(fmt.Sprintf("$.docker.group_add[%d]", i), "%q is not a group name or ID", g)
		}
	}
	for i, vol := range d.Volumes {
		p := fmt.Sprintf("$.docker.volumes[%d]", i)
		if !volumePattern.MatchString(vol.Name) {
			v.add(p+".name", "%q is not a Docker volume name", vol.Name)
		}
		if !filepath.IsAbs(vol.Target) || filepath.Clean(vol.Target) != vol.Target || vol.Target == "/" {
			v.add(p+".target", "must be a clean absolute path other than / (got %q)", vol.Target)
		}
	}
	for i, h := range d.ExtraHosts {
		if !extraHostPattern.MatchString(h) {
			v.add(fmt.Sprintf("$.docker.extra_hosts[%d]", i), "%q is not name:address", h)
		}
	}
	if d.OOMScoreAdj < -1000 || d.OOMScoreAdj > 1000 {
		v.add("$.docker.oom_score_adj", "must be between -1000 and 1000")
	}
	if d.CPUShares < 0 {
		v.add("$.docker.cpu_shares", "must not be negative")
	}
	if d.CpusetCPUs != "" && !cpusetPattern.MatchString(d.CpusetCPUs) {
		v.add("$.docker.cpuset_cpus", "%q is not a CPU list such as 0-1 or 0,2", d.CpusetCPUs)
	}
}

// SharesHostNetwork reports whether the sandbox's network is not one the
// harness owns and confines (host or Docker's default bridge): network probes
// must not run there, since their traffic would leave the harness's
// addresses. Such a target is graded from the runtime's view.
func (t *Target) SharesHostNetwork() bool {
	return t.Docker != nil && slices.Contains(UnconfinedNetworks, t.Docker.Network)
}

// UnconfinedNetworks are the network settings whose traffic the harness
// cannot keep to its own addresses.
var UnconfinedNetworks = []string{"host", "bridge", "default"}
