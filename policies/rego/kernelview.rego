# The host kernel's view (the eBPF tracer). On a shared-kernel runtime the
# kernel sees every syscall a probe makes, so a syscall probe's "blocked" is
# confirmed by the kernel having refused the call. Without that view (the
# tracer unavailable, turned off, or blind to the probe's sandbox) the result
# rests on the box's word and the seccomp profile: the criterion is
# unconfirmed, never passed. Under a user-space kernel (gVisor) or a VM the
# host kernel never sees the workload's syscalls, so nothing relies on it.
package sandcheck.criteria

import rego.v1

# kernel_view_probe holds for the probes whose blocked outcome the kernel's
# view confirms: one named syscall each.
kernel_view_probe(id) if startswith(id, "syscalls.")

shared_kernel_runtime if data.sandcheck.profiles.runtime_classes[input.runtime] == "shared-kernel"

tracer_status := object.get(input, ["tracer", "status"], "absent")

tracer_reason := object.get(input, ["tracer", "reason"], "the record has no tracer section")

# kernel_saw holds when the tracer joined its count of the probe's syscall.
kernel_saw(r) if {
	some i in evidence(r)
	i.source == "tracer"
	i.kind == "tracer-syscall"
}

unconfirmed_no_kernel_view contains finding(c, "", msg) if {
	shared_kernel_runtime
	some c in {c | some g in counted; some c in g.criteria}
	blind := sort({g.result.probe |
		some g in counted
		c in g.criteria
		g.effective == "blocked"
		kernel_view_probe(g.result.probe)
		not kernel_saw(g.result)
	})
	count(blind) > 0
	msg := sprintf("tracer %s (%s): the kernel's view is missing for %d blocked syscall probe(s) on shared-kernel runtime %s (%s), so their blocked rests on the box's word", [tracer_status, tracer_reason, count(blind), input.runtime, concat(", ", array.slice(blind, 0, 5))])
}
