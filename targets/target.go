// Package targets reads target files: which runner, image and profile a run
// uses, and how the runner must configure each sandbox. The format is
// versioned (schema: sandcheck.dev/target/v1); errors name file, line and
// field.
package targets

// Schema is the only target schema this build reads.
const Schema = "sandcheck.dev/target/v1"

// Target is one parsed target file.
type Target struct {
	// Schema is the format version: sandcheck.dev/target/v1.
	Schema string `yaml:"schema"`
	// Name names the target in reports, waivers and sandbox labels.
	Name string `yaml:"name"`
	// Runner is how sandboxes are started: docker, bwrap, process, command,
	// gateway, opensandbox or kubernetes.
	Runner string `yaml:"runner"`
	// Image is the sandbox image, present locally (sandcheck never pulls);
	// required for docker only (bwrap and process use the host's files).
	Image string `yaml:"image"`
	// Profile is the design guide's profile the platform runs this target
	// under (no-network-transform, package-build, brokered-data-task,
	// mediated-browser, high-risk-code, human-approved-publish); it decides
	// what each probe must show and which runtime classes are accepted.
	Profile string `yaml:"profile"`
	// Description is free text for reports.
	Description string `yaml:"description,omitempty"`
	// Docker configures the docker runner; required when Runner is docker.
	Docker *Docker `yaml:"docker,omitempty"`
	// Command configures the command runner (a platform driven through its
	// own command-line tool); required when Runner is command.
	Command *Command `yaml:"command,omitempty"`
	// Gateway configures the gateway runner (the agent-runtime API);
	// required when Runner is gateway.
	Gateway *Gateway `yaml:"gateway,omitempty"`
	// OpenSandbox configures the opensandbox runner; required when Runner
	// is opensandbox.
	OpenSandbox *OpenSandbox `yaml:"opensandbox,omitempty"`
	// Kubernetes configures the kubernetes runner; required when Runner is
	// kubernetes.
	Kubernetes *Kubernetes `yaml:"kubernetes,omitempty"`
	// Tasks is how the platform hands work to its sandboxes: launch mode,
	// agent and CPU time budget, for every runner (nil: the runner
	// section's keys, else the defaults).
	Tasks *Tasks `yaml:"tasks,omitempty"`
	// Output declares the task's output folder and its release path (nil:
	// the target declares none).
	Output *Output `yaml:"output,omitempty"`
	// Inputs declares the folder the platform hands the task its inputs in
	// (nil: the target declares none).
	Inputs *Inputs `yaml:"inputs,omitempty"`
	// ImageVerify, when set, has the harness verify the image's signature
	// and SBOM before any sandbox starts (see ImageVerify).
	ImageVerify *ImageVerify `yaml:"image_verify,omitempty"`
	// Attribution names the platform's own labels that
	// carry each sandbox's run, task and policy identity (nil: the
	// sandboxes' labels must name sandcheck's run, target and task).
	Attribution *Attribution `yaml:"attribution,omitempty"`
	// Broker declares the platform's tool broker for the broker probes (nil: none; see Broker).
	Broker *Broker `yaml:"broker,omitempty"`

	// Section is the runner's own section (the key named as the runner),
	// decoded and validated by the runner's package (set by Load for a
	// runner registered through runners.RegisterPlugin; nil otherwise).
	Section Section `yaml:"-"`

	// Path is the file the target was read from (set by Load).
	Path string `yaml:"-"`
	// Digest is the sha256 of the file's bytes (set by Load).
	Digest string `yaml:"-"`
	// src is the file's bytes, for checks made after Load that name a line.
	src []byte
}

// Docker is how the docker runner configures each container.
type Docker struct {
	// Runtime is the OCI runtime: runc or runsc.
	Runtime string `yaml:"runtime"`
	// Launch is how the platform hands work to a sandbox: "exec" (one
	// long-lived sandbox, each task exec'd into it, as session and pooled
	// platforms do; the default) or "task" (each task is the first process of
	// a fresh sandbox, as ephemeral platforms do).
	Launch string `yaml:"launch,omitempty"`
	// Agent says whether the platform keeps an agent process in each
	// sandbox beside the task, holding its key in its environment: "root"
	// (the default: the harness starts such a holder as root beside the
	// probes that look for it) or "none" (the platform keeps no process in
	// the box).
	Agent string `yaml:"agent,omitempty"`
	// User is "uid[:gid]" or a name; empty means the image's default.
	User string `yaml:"user,omitempty"`
	// CapAdd and CapDrop are capability names without the CAP_ prefix; ALL
	// is allowed in CapDrop.
	CapAdd  []string `yaml:"cap_add,omitempty"`
	CapDrop []string `yaml:"cap_drop,omitempty"`
	// Seccomp is "default", "unconfined" or a path to a profile (relative to
	// the target file).
	Seccomp string `yaml:"seccomp,omitempty"`
	// AppArmor is "default" or "unconfined" (ignored where AppArmor is off).
	AppArmor string `yaml:"apparmor,omitempty"`
	// SystemPaths is "masked" (the runtime's masked and read-only /proc
	// paths) or "unconfined".
	SystemPaths string `yaml:"system_paths,omitempty"`
	// NoNewPrivileges sets no_new_privs on the workload.
	NoNewPrivileges bool `yaml:"no_new_privileges"`
	// ReadOnlyRootfs mounts the image read-only.
	ReadOnlyRootfs bool `yaml:"read_only_rootfs"`
	// Tmpfs are size-limited tmpfs mounts (scratch, /tmp).
	Tmpfs []Tmpfs `yaml:"tmpfs,omitempty"`
	// ShmSize is the size of /dev/shm, e.g. "8Mi"; empty means the engine's
	// default (64 MiB for Docker).
	ShmSize string `yaml:"shm_size,omitempty"`
	// Ulimits are per-process resource limits (setrlimit) of every process
	// in the sandbox, e.g. nofile and cpu; a name not listed keeps the
	// engine's default.
	Ulimits []Ulimit `yaml:"ulimits,omitempty"`
	// PidsLimit caps the number of tasks; 0 means no limit.
	PidsLimit int64 `yaml:"pids_limit,omitempty"`
	// Memory caps memory, e.g. "128Mi"; empty means no limit.
	Memory string `yaml:"memory,omitempty"`
	// CPUs caps CPU, e.g. 0.5; 0 means no limit.
	CPUs float64 `yaml:"cpus,omitempty"`
	// CPUTime is the CPU time budget of one task, e.g. 2s: the platform's
	// watchdog kills a task's sandbox once its cgroup has used more (the
	// harness plays that watchdog from outside, on the sandbox of the probe
	// that measures it, resources.cpu-deadline; under gVisor the cgroup
	// holds the sentry, so the budget holds there too, unlike RLIMIT_CPU).
	// Empty means no budget.
	CPUTime string `yaml:"cpu_time,omitempty"`
	// Network is "none", "harness" (the harness's canary network, which
	// reaches only harness-owned addresses), "host" or "bridge" (accepted
	// so they can be graded: the runtime's view fails them, and no network
	// probe runs there) or the name of an existing Docker network.
	Network string `yaml:"network"`
	// Egress is the egress profile the platform promises for the sandbox:
	// none, mirror-only, broker-only, proxy-only or open (see EgressProfiles).
	// Empty means none on network none and open otherwise. On the harness
	// network the harness enforces it, so a sandbox reaches only what the
	// profile grants.
	Egress string `yaml:"egress,omitempty"`
	// Mounts are bind mounts of host paths. A relative source is relative to
	// the target file; ${SANDCHECK_RUN_DIR} expands to the run's own folder.
	Mounts []Mount `yaml:"mounts,omitempty"`
	// Env is added to the container environment.
	Env map[string]string `yaml:"env,omitempty"`
	// PID is the PID namespace: empty for the sandbox's own, "host" to share
	// the host's (as `docker run --pid host` does).
	PID string `yaml:"pid,omitempty"`
	// Devices are host devices put into the sandbox (`docker run --device`).
	// The source ${SANDCHECK_BLOCK_CANARY} is a read-only loop device the
	// harness makes over a small file in the run's folder and removes after
	// the run.
	Devices []Device `yaml:"devices,omitempty"`
	// Hostname is the sandbox's host name, the identity the task sees from
	// inside; ${SANDCHECK_RUN_ID}, ${SANDCHECK_TARGET} and ${SANDCHECK_TASK}
	// are filled per sandbox (see IdentityHostname). Empty lets the runtime
	// pick one (Docker: the container ID), which binds nothing.
	Hostname string `yaml:"hostname,omitempty"`
	// Labels are the platform's own labels on each sandbox, the identity seen
	// from outside; the same variables are filled per sandbox. The harness
	// adds its sandcheck.* labels in any case, so those names are reserved.
	Labels map[string]string `yaml:"labels,omitempty"`
	// DockerHost is the rest of Docker's host configuration (hostconfig.go).
	DockerHost `yaml:",inline"`
}

// BlockCanarySource names, as a device source, the harness's loop device.
const BlockCanarySource = "${SANDCHECK_BLOCK_CANARY}"

// Device is one host device put into the sandbox.
type Device struct {
	// Source is the host device path, or ${SANDCHECK_BLOCK_CANARY}.
	Source string `yaml:"source"`
	// Target is the device path inside the sandbox.
	Target string `yaml:"target"`
	// Permissions are the device cgroup permissions: r, w, m or a
	// combination; empty means r.
	Permissions string `yaml:"permissions,omitempty"`
}

// UsesBlockCanary reports whether a device of the target is the harness's
// loop device.
func (t *Target) UsesBlockCanary() bool {
	for _, d := range t.Declared().Devices {
		if d.Source == BlockCanarySource {
			return true
		}
	}
	return false
}

// The egress profiles a target may declare.
const (
	EgressNone       = "none"
	EgressMirrorOnly = "mirror-only"
	EgressBrokerOnly = "broker-only"
	EgressProxyOnly  = "proxy-only"
	EgressOpen       = "open"
)

// EgressProfiles lists the egress profiles, most restrictive first.
var EgressProfiles = []string{EgressNone, EgressMirrorOnly, EgressBrokerOnly, EgressProxyOnly, EgressOpen}

// EgressProfile is the target's effective egress profile: the declared one,
// or none for a sandbox without a network and open otherwise.
func (t *Target) EgressProfile() string { return t.Declared().Egress }

// egressProfile is docker's egress key, or what its network implies.
func (d *Docker) egressProfile() string {
	if d.Egress != "" {
		return d.Egress
	}
	if d.Network == "none" {
		return EgressNone
	}
	return EgressOpen
}

// Tmpfs is one size-limited tmpfs mount.
type Tmpfs struct {
	// Path is where it is mounted in the sandbox.
	Path string `yaml:"path"`
	// Size caps it, e.g. "32Mi". Left out, the docker runner mounts it
	// as Docker does a tmpfs given no size: capped only by the kernel's
	// default, half the host's memory (the probes grade that; the bwrap
	// runner requires a size).
	Size string `yaml:"size,omitempty"`
	// Exec allows executing files from it (default noexec).
	Exec bool `yaml:"exec,omitempty"`
	// NrInodes caps the number of files, folders and links in it; 0 means
	// the kernel's default (half the machine's RAM pages).
	NrInodes int64 `yaml:"nr_inodes,omitempty"`
}

// Ulimit is one per-process resource limit, as setrlimit(2) takes it: Name
// is the rlimit without RLIMIT_ in lower case (nofile, cpu, nproc...), Soft
// and Hard its soft and hard values (Soft <= Hard).
type Ulimit struct {
	// Name is the limit's name as Docker knows it (nofile, nproc, cpu, ...;
	// see UlimitNames).
	Name string `yaml:"name"`
	// Soft is the soft limit the workload starts with.
	Soft int64 `yaml:"soft"`
	// Hard is the ceiling the workload cannot raise the soft limit past.
	Hard int64 `yaml:"hard"`
}

// UlimitNames are the limits Docker knows by name.
var UlimitNames = []string{"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue",
	"nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// Mount is one bind mount.
type Mount struct {
	// Source is the host path (relative to the target file, or under
	// ${SANDCHECK_RUN_DIR}).
	Source string `yaml:"source"`
	// Target is the path inside the sandbox.
	Target string `yaml:"target"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `yaml:"read_only,omitempty"`
}
