package impl

import (
	"context"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// The fingerprint facts beyond the runtime class: which kernel answers,
// which cgroup version the box sees, and how it is confined. All are
// informational (not-applicable); the harness sets each beside what it
// sees from outside (the host's kernel and cgroup version, the engine's
// runtime and security options), which is what policies grade by.
func init() {
	register(map[string]Func{
		"fingerprint.kernel-shared":  fingerprintKernel,
		"fingerprint.cgroup-version": fingerprintCgroup,
		"fingerprint.confinement":    fingerprintConfinement,
	})
}

// fingerprintKernel reports uname's release and version, the facts the
// harness compares with the host's own: equal means the box runs on the
// host's kernel.
func fingerprintKernel(_ context.Context, _ probes.Params) probes.Result {
	var u unix.Utsname
	e := ev{}
	if err := unix.Uname(&u); err != nil {
		e.setErr("uname_", err)
		return result(probes.NotApplicable, "uname failed", e)
	}
	rel, ver := unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Version[:])
	e.set("kernel_release", rel)
	e.set("kernel_version", ver)
	class, reason := runtimeClass(readRuntimeFacts())
	e.set("runtime_class", class)
	return result(probes.NotApplicable, "kernel "+rel+" ("+class+": "+reason+")", e)
}

// fingerprintCgroup reports the cgroup version mounted in the box and the
// box's own cgroup path.
func fingerprintCgroup(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	switch {
	case statOK("/sys/fs/cgroup/cgroup.controllers"):
		e.set("cgroup_version", "2")
		if b, err := readNoFollow("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			e.set("controllers", strings.TrimSpace(string(b)))
		}
	case statOK("/sys/fs/cgroup"):
		e.set("cgroup_version", "1")
	default:
		e.set("cgroup_version", "none")
	}
	if b, err := readProcFile("/proc/self/cgroup"); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		e.setInt("hierarchies", len(lines))
		e.set("self_cgroup", clip(lines[0], 200))
	}
	return result(probes.NotApplicable, "cgroup version "+e["cgroup_version"], e)
}

// fingerprintConfinement reports the seccomp mode and filter count,
// no_new_privs, the effective capabilities and the LSM label of the probe
// itself (AppArmor or SELinux, where the kernel shows one).
func fingerprintConfinement(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	if b, err := readProcFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			switch {
			case !ok:
			case k == "Seccomp", k == "Seccomp_filters", k == "NoNewPrivs", k == "CapEff", k == "CapBnd":
				e.set(strings.ToLower(k), strings.TrimSpace(v))
			}
		}
	}
	for _, f := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		if b, err := readProcFile(f); err == nil {
			if l := strings.TrimSpace(strings.TrimRight(string(b), "\x00")); l != "" {
				e.set("lsm_label", clip(l, 128))
				break
			}
		}
	}
	if b, err := readNoFollow("/sys/kernel/security/lsm"); err == nil {
		e.set("lsm_stack", clip(strings.TrimSpace(string(b)), 128))
	}
	label := e["lsm_label"]
	if label == "" {
		label = "none visible"
	}
	return result(probes.NotApplicable, "seccomp "+e["seccomp"]+", no_new_privs "+e["nonewprivs"]+", LSM label "+label, e)
}

func statOK(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
