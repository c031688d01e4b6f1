package impl

import (
	"context"
	"os"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"fingerprint.runtime": fingerprintRuntime})
}

// gVisor's Sentry reports this fixed kernel release and version string,
// whatever the host runs.
const (
	gvisorRelease = "4.4.0"
	gvisorVersion = "#1 SMP Sun Jan 10 15:06:54 PST 2016"
)

// runtimeFacts is what fingerprint.runtime reads; a struct so the decision
// can be tested without the files.
type runtimeFacts struct {
	release, version string // uname
	pid1Comm         string // /proc/1/comm
	dockerEnv        bool   // /.dockerenv exists
	containerEnv     bool   // /run/.containerenv exists (podman)
	cgroup           string // /proc/self/cgroup
	cpuHypervisor    bool   // the "hypervisor" cpu flag
}

// runtimeClass decides the runtime class from inside, with the reason. The
// order matters: gVisor and bubblewrap are told by their own marks first;
// a container marker (engine file or cgroup path) means a shared-kernel
// container runtime (runc, crun); a microVM cannot be told from inside a
// container on a virtual host, so the hypervisor flag only goes into the
// evidence.
func runtimeClass(f runtimeFacts) (class, reason string) {
	switch {
	case f.release == gvisorRelease && strings.Contains(f.version, gvisorVersion):
		return "gvisor", "uname reports gVisor's fixed kernel " + gvisorRelease + " " + gvisorVersion
	case f.pid1Comm == "bwrap":
		return "bubblewrap", "process 1 of the pid namespace is bwrap"
	case f.dockerEnv:
		return "runc", "/.dockerenv is present (a Docker container on the host's kernel)"
	case f.containerEnv:
		return "runc", "/run/.containerenv is present (a Podman container on the host's kernel)"
	case containerCgroup(f.cgroup):
		return "runc", "the cgroup path names a container engine"
	}
	return "none", "no sandbox marks: the process looks like it runs on the host"
}

func containerCgroup(cg string) bool {
	for _, m := range []string{"docker", "containerd", "kubepods", "libpod", "crio", "lxc"} {
		if strings.Contains(cg, m) {
			return true
		}
	}
	return false
}

func readRuntimeFacts() runtimeFacts {
	var f runtimeFacts
	if k := kernelRelease(); k != "" {
		f.release, f.version, _ = strings.Cut(k, " ")
	}
	f.pid1Comm = firstLine("/proc/1/comm")
	_, err := os.Stat("/.dockerenv")
	f.dockerEnv = err == nil
	_, err = os.Stat("/run/.containerenv")
	f.containerEnv = err == nil
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		f.cgroup = string(b)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		f.cpuHypervisor = strings.Contains(string(b), " hypervisor")
	}
	return f
}

// fingerprintRuntime is informational: it reports the runtime class and the
// facts around it (kernel, cgroup version, seccomp and no_new_privs state)
// for policies and people, and its outcome is not-applicable: there is no
// attempt to block.
func fingerprintRuntime(_ context.Context, _ probes.Params) probes.Result {
	f := readRuntimeFacts()
	class, reason := runtimeClass(f)
	e := ev{"runtime_class": class, "reason": reason, "kernel": strings.TrimSpace(f.release + " " + f.version)}
	if class == "gvisor" {
		e.set("kernel_shared_with_host", "false")
	} else {
		e.set("kernel_shared_with_host", "true")
	}
	if f.pid1Comm != "" {
		e.set("pid1_comm", f.pid1Comm)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		e.set("cgroup_version", "2")
	} else if _, err := os.Stat("/sys/fs/cgroup"); err == nil {
		e.set("cgroup_version", "1")
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "Seccomp" || k == "NoNewPrivs") {
				e.set(strings.ToLower(k), strings.TrimSpace(v))
			}
		}
	}
	if f.cpuHypervisor {
		e.set("cpu_hypervisor_flag", "true")
	}
	return result(probes.NotApplicable, "runtime class "+class+": "+reason, e)
}
