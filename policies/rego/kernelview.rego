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

# tracer_syscall is the tracer's count of the probe's own syscall, if any.
tracer_syscall(r) := i if {
	some i in evidence(r)
	i.source == "tracer"
	i.kind == "tracer-syscall"
}

# refusal_counts maps the refusals a syscall probe may declare to the
# tracer's count fields. The probe's blocked means one of these answers.
refusal_counts := {"EPERM": "eperm", "EACCES": "eacces", "ENOSYS": "enosys"}

# declared_refusal is the errno the probe says blocked it ("EPERM(1)" ->
# "EPERM"), when it says one the tracer counts.
declared_refusal(r) := name if {
	some i in evidence(r)
	i.source == "probe"
	e := object.get(i, ["data", "errno"], "")
	is_string(e)
	name := split(e, "(")[0]
	refusal_counts[name]
}

refused_count(i, field) := to_number(object.get(i, ["data", field], "0")) if {
	is_string(object.get(i, ["data", field], "0"))
} else := object.get(i, ["data", field], 0) if {
	is_number(object.get(i, ["data", field], 0))
} else := 0

# kernel_saw holds when the tracer saw the probe's call return the refusal the
# probe declares (any of EPERM, EACCES, ENOSYS when it declares none). The
# absence of a call is never a confirmation: a probe that claims blocked
# without making the call stays unconfirmed.
kernel_saw(r) if {
	i := tracer_syscall(r)
	field := refusal_counts[declared_refusal(r)]
	refused_count(i, field) > 0
}

kernel_saw(r) if {
	not declared_refusal(r)
	i := tracer_syscall(r)
	some field in refusal_counts
	refused_count(i, field) > 0
}

# kernel_watched holds when the tracer counted the probe's syscall at all
# (seen or not): its silence then speaks against the probe's word.
kernel_watched(r) if tracer_syscall(r)

# tracer_doubted is the tracer's count of the probe's own syscall when the
# host could not establish whose seccomp filter refused it: the probe's
# process ran before the watch with no clean reading of the box's seccomp
# state to vouch for that time, the tracer lost events, or the probe spent
# its event budget (engine/trace.go: watchDoubts).
tracer_doubted(r) := i if {
	some i in evidence(r)
	i.source == "tracer"
	i.kind == "tracer-syscall-unconfirmed"
}

blocked_syscall_probes := [g |
	some g in counted
	g.effective == "blocked"
	kernel_view_probe(g.result.probe)
]

unconfirmed_no_kernel_view contains finding(c, "", msg) if {
	shared_kernel_runtime
	some c in {c | some g in blocked_syscall_probes; some c in g.criteria}
	blind := sort({g.result.probe |
		some g in blocked_syscall_probes
		c in g.criteria
		not kernel_watched(g.result)
		not tracer_doubted(g.result)
	})
	count(blind) > 0
	msg := sprintf("tracer %s (%s): the kernel's view is missing for %d blocked syscall probe(s) on shared-kernel runtime %s (%s), so their blocked rests on the box's word", [tracer_status, tracer_reason, count(blind), input.runtime, concat(", ", array.slice(blind, 0, 5))])
}

unconfirmed_no_kernel_view contains finding(c, "", msg) if {
	shared_kernel_runtime
	some c in {c | some g in blocked_syscall_probes; some c in g.criteria}
	unseen := sort({g.result.probe |
		some g in blocked_syscall_probes
		c in g.criteria
		kernel_watched(g.result)
		not kernel_saw(g.result)
	})
	count(unseen) > 0
	msg := sprintf("the kernel never saw the call refused for %d syscall probe(s) that report blocked on shared-kernel runtime %s (%s): no call seen is not a confirmation", [count(unseen), input.runtime, concat(", ", array.slice(unseen, 0, 5))])
}

# A refusal the kernel counted is no confirmation while whose filter made
# it is open: the box may have filtered itself where the host did not look.
unconfirmed_kernel_view_doubted contains finding(c, g.result.probe, msg) if {
	shared_kernel_runtime
	some g in blocked_syscall_probes
	i := tracer_doubted(g.result)
	some c in g.criteria
	msg := sprintf("probe %s reports blocked, but whose seccomp filter refused its call is not established: %s", [g.result.probe, i.summary])
}
