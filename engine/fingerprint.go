package engine

import (
	"fmt"
	"os"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// fingerprintHosts are the host evidence kinds of the fingerprint family:
// what the host itself knows, set beside what the probe saw from inside.
// None of them indicates an outcome (fingerprints are informational); the
// policy reads their data (policies/rego/runtime.rego).
var fingerprintHosts = map[string]bool{
	"runtime:runtime-class": true, "runtime:confinement": true, "runtime:host-kernel": true, "runtime:host-cgroup": true,
}

// fingerprintEvidence corroborates a fingerprint from outside.
func (e *Engine) fingerprintEvidence(kind string, s *sandbox, self selfReport) (evidence.Item, bool) {
	switch kind {
	case "runtime:runtime-class":
		if s.view == nil {
			return evidence.Item{}, false
		}
		inside := self.Fields["runtime_class"]
		return evidence.Item{Source: evidence.SourceRuntime, Kind: "runtime-class",
			Summary: fmt.Sprintf("the engine ran the box with runtime %q; the probe saw class %q from inside", s.view.Runtime, inside),
			Data:    map[string]string{"engine_runtime": s.view.Runtime, "inside_class": inside}}, true
	case "runtime:confinement":
		if s.view == nil {
			return evidence.Item{}, false
		}
		return evidence.Item{Source: evidence.SourceRuntime, Kind: "confinement",
			Summary: fmt.Sprintf("the engine was told: seccomp %s, no_new_privileges %t, security options %v", s.view.Seccomp, s.view.NoNewPrivileges, s.view.SecurityOpt),
			Data:    map[string]string{"engine_seccomp": s.view.Seccomp, "engine_no_new_privileges": fmt.Sprint(s.view.NoNewPrivileges)}}, true
	case "runtime:host-kernel":
		return kernelComparison(self.Fields, e.rec.Host.Kernel, hostKernelVersion())
	case "runtime:host-cgroup":
		inside := self.Fields["cgroup_version"]
		host := fmt.Sprint(e.rec.Host.CgroupVersion)
		return evidence.Item{Source: evidence.SourceRuntime, Kind: "host-cgroup",
			Summary: fmt.Sprintf("cgroup version inside %q, on the host %s", inside, host),
			Data:    map[string]string{"inside": inside, "host": host}}, true
	}
	return evidence.Item{}, false
}

// kernelComparison sets the kernel the probe saw (uname from inside, in its
// fields kernel_release and kernel_version, or fingerprint.runtime's
// "kernel" as "release version") beside the host's own. The same release and
// version string mean the box runs on the host's kernel; the box cannot make
// a shared kernel look private without lying, and a lie that claims to be
// the host's kernel only makes the grade stricter.
func kernelComparison(f map[string]string, hostRelease, hostVersion string) (evidence.Item, bool) {
	rel, ver := f["kernel_release"], f["kernel_version"]
	if rel == "" {
		rel, ver, _ = strings.Cut(f["kernel"], " ")
	}
	if rel == "" || hostRelease == "" {
		return evidence.Item{Source: evidence.SourceRuntime, Kind: "host-kernel",
			Summary: "the probe reported no kernel, or the host's is unknown: not compared"}, true
	}
	shared := rel == hostRelease && (hostVersion == "" || ver == hostVersion)
	sum := fmt.Sprintf("kernel inside %s, on the host %s: ", rel, hostRelease)
	if shared {
		sum += "the box runs on the host's kernel"
	} else {
		sum += "the box does not run on the host's kernel"
	}
	return evidence.Item{Source: evidence.SourceRuntime, Kind: "host-kernel", Summary: sum,
		Data: map[string]string{"inside_release": truncate(rel, 64), "host_release": hostRelease, "shared": fmt.Sprint(shared)}}, true
}

// hostKernelVersion is the host's uname version string.
func hostKernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/version")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
