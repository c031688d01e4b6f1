package probes

import (
	"slices"
	"strings"
)

// Needs is the closed vocabulary of runner capabilities a probe may need
// (the words of runners.Capabilities).
var Needs = []string{"network", "inspect", "task-launch", "host-pid", "cpu-meter", "residue"}

// hostKinds is the closed vocabulary of host-side evidence: every kind an
// observer of the engine produces, with the runner capability the observer
// relies on ("" when it needs none beyond the harness itself). A catalog
// entry naming any other kind fails to load.
var hostKinds = map[string]string{
	"broker:lifetime": "", "broker:replay": "", "broker:revocation": "", "broker:scope": "",
	"agent-socket": "", "block-canary": "", "canary-process": "", "cpu-budget": "cpu-meter",
	"environ-holder": "", "honeyfile": "", "honeytoken": "",
	"inputs:intact": "", "inputs:read": "", "output:release": "", "output:workload": "",
	"canary:broker": "", "canary:dns": "", "canary:kube-api": "", "canary:metadata": "",
	"canary:proxy": "", "canary:sink": "",
	// The host's dials from the sandbox's network namespace: a runner that
	// cannot enter it gives no fact, so no need is implied.
	"netpath:alibaba": "", "netpath:dns-alt": "", "netpath:doh": "", "netpath:dot": "", "netpath:ecs": "",
	"netpath:gateway-services": "", "netpath:kube-api": "", "netpath:metadata": "", "netpath:metadata6": "",
	"netpath:mirror": "", "netpath:neighbour": "", "netpath:other-resolver": "", "netpath:outside": "",
	"netpath:outside-route": "", "netpath:outside6": "",
	"netpath:resolver-zone-udp": "", "netpath:resolver-zone-tcp": "", "netpath:proxy-outside": "", "netpath:proxy-mirror": "",
	"netpath:broker": "", "netpath:broker-no-token": "",
	"runtime:carryover-keyring": "", "runtime:carryover-processes": "", "runtime:carryover-scratch": "",
	"runtime:caps": "", "runtime:confinement": "", "runtime:devices": "", "runtime:env": "", "runtime:execd-published": "",
	"runtime:host-cgroup": "", "runtime:host-kernel": "", "runtime:hostname": "", "runtime:labels": "",
	"runtime:masked-paths": "", "runtime:memory-limit": "", "runtime:mounts": "",
	"runtime:no-new-privileges": "", "runtime:oom": "", "runtime:pid": "", "runtime:pids-limit": "",
	"runtime:read-only-rootfs": "", "runtime:runtime-class": "", "runtime:scratch-limits": "", "runtime:seccomp": "", "runtime:user": "",
	"teardown:cgroups": "residue", "teardown:container": "residue", "teardown:mounts": "residue",
	"teardown:network": "residue", "teardown:processes": "residue", "teardown:scratch": "residue",
}

// KnownHostKind reports whether kind is in the host-evidence vocabulary.
func KnownHostKind(kind string) bool {
	_, ok := hostKinds[kind]
	return ok
}

// HostKinds lists the host-evidence vocabulary, sorted.
func HostKinds() []string {
	out := make([]string, 0, len(hostKinds))
	for k := range hostKinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Requires is everything the probe needs of a runner: its declared needs
// and those its host evidence and category imply, sorted, without repeats.
// A probe that sends traffic off the sandbox (the metadata and egress
// families, a canary observer, the needs-network label) needs "network": a
// runner that cannot confine its sandboxes' traffic to the harness's
// addresses (a host-network target) lacks it, so such probes are never run
// there. A probe restricted to a platform's runners (its own daemons on the
// box's loopback) needs no network by its family alone.
func (s Spec) Requires() []string {
	out := slices.Clone(s.Needs)
	// A probe of one platform's own in-box daemons (Runners) talks only to
	// the box's loopback, whatever its family.
	network := len(s.Runners) == 0 && (s.Category == "metadata" || s.Category == "egress") || slices.Contains(s.Labels, "needs-network")
	for _, h := range s.Host {
		if n := hostKinds[h]; n != "" {
			out = append(out, n)
		}
		network = network || strings.HasPrefix(h, "canary:")
	}
	if network {
		out = append(out, "network")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NotTestedReason says why a runner that lacks the given needs cannot carry
// out a probe.
func NotTestedReason(runner string, missing []string) string {
	return "runner " + runner + " lacks what the probe needs: " + strings.Join(missing, ", ")
}
