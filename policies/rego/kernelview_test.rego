# Tests of kernelview.rego: a syscall probe's blocked needs the kernel's view
# on a shared-kernel runtime.
package sandcheck.kernelview_test

import rego.v1

import data.sandcheck.criteria
import data.sandcheck.results_test as rt
import data.sandcheck.test.fixtures

on_runtime(runtime, results, tracer) := object.union(fixtures.record_base, {
	"runtime": runtime,
	"sandboxes": [object.union(fixtures.sandbox, {"runtime_view": object.union(fixtures.view, {"runtime": runtime})})],
	"results": results,
	"tracer": tracer,
})

unavailable := {"status": "unavailable", "reason": "no BPF here", "runtime": "runc", "host_syscalls": []}

blind := [rt.with_items(rt.res("syscalls.bpf", "blocked"), [rt.item("tracer", "tracer-unavailable", "")])]

seen := [rt.with_items(rt.res("syscalls.bpf", "blocked"), [object.union(rt.item("tracer", "tracer-syscall", "blocked"), {"data": {"calls": "1", "eperm": "1"}})])]

test_unavailable_tracer_on_runc_is_unconfirmed if {
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", blind, unavailable)
		with data.catalog as rt.catalog
	some x in f
	x.criterion == "hardened-runtime"
	contains(x.msg, "tracer unavailable (no BPF here)")
	contains(x.msg, "syscalls.bpf")
}

test_record_without_tracer_on_runc_is_unconfirmed if {
	rec := object.remove(on_runtime("runc", blind, {}), ["tracer"])
	f := criteria.unconfirmed_no_kernel_view with input as rec with data.catalog as rt.catalog
	count(f) == 1
}

test_kernel_view_present_on_runc_is_confirmed if {
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", seen, {"status": "on", "runtime": "runc", "host_syscalls": []})
		with data.catalog as rt.catalog
	count(f) == 0
}

test_gvisor_does_not_rely_on_the_host_kernel if {
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runsc", blind, unavailable)
		with data.catalog as rt.catalog
	count(f) == 0
}

test_escaped_probe_needs_no_kernel_view if {
	esc := [rt.with_items(rt.res("syscalls.bpf", "escaped"), [rt.item("tracer", "tracer-unavailable", "")])]
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", esc, unavailable)
		with data.catalog as rt.catalog
	count(f) == 0
}

# --- issue 16 item 1: the absence of a call is never a confirmation ---------------

tracer_on := {"status": "on", "runtime": "runc", "host_syscalls": []}

counts(calls, ok, eperm, enosys) := {
	"source": "tracer", "kind": "tracer-syscall", "summary": "s",
	"data": {
		"syscall": "bpf", "calls": sprintf("%d", [calls]), "ok": sprintf("%d", [ok]),
		"eperm": sprintf("%d", [eperm]), "eacces": "0", "enosys": sprintf("%d", [enosys]), "other_errors": "0",
	},
}

# probe_says is a probe's self-report naming the errno that blocked it.
probe_says(errno) := rt.with_items(rt.res("syscalls.bpf", "blocked"), [{
	"source": "probe", "kind": "self-report", "summary": "s", "indicates": "blocked",
	"data": {"errno": errno},
}])

# A lying probe: it reports blocked, the tracer watched it and saw no call.
lying := [rt.with_items(probe_says("EPERM(1)"), [counts(0, 0, 0, 0)])]

test_lying_probe_without_the_call_is_unconfirmed if {
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", lying, tracer_on)
		with data.catalog as rt.catalog
	some x in f
	x.criterion == "hardened-runtime"
	contains(x.msg, "never saw the call refused")
	contains(x.msg, "syscalls.bpf")
}

hardened_runtime_reasons(results) := g.reasons if {
	v := data.sandcheck.release.verdict with input as on_runtime("runc", results, tracer_on)
		with data.catalog as rt.catalog
	some g in v.criteria
	g.id == "hardened-runtime"
}

test_lying_probe_cannot_pass_the_release if {
	some m in hardened_runtime_reasons(lying)
	contains(m, "never saw the call refused")
	not data.sandcheck.release.pass with input as on_runtime("runc", lying, tracer_on)
		with data.catalog as rt.catalog
	every m in hardened_runtime_reasons([rt.with_items(probe_says("EPERM(1)"), [counts(1, 0, 1, 0)])]) {
		not contains(m, "never saw")
	}
}

test_call_refused_with_eperm_is_confirmed if {
	r := [rt.with_items(probe_says("EPERM(1)"), [counts(1, 0, 1, 0)])]
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", r, tracer_on)
		with data.catalog as rt.catalog
	count(f) == 0
}

test_refusal_other_than_the_declared_one_is_unconfirmed if {
	r := [rt.with_items(probe_says("EPERM(1)"), [counts(1, 0, 0, 1)])]
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", r, tracer_on)
		with data.catalog as rt.catalog
	count(f) == 1
}

test_any_refusal_confirms_when_the_probe_declares_none if {
	r := [rt.with_items(rt.res("syscalls.bpf", "blocked"), [counts(2, 0, 0, 2)])]
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", r, tracer_on)
		with data.catalog as rt.catalog
	count(f) == 0
}

# --- issue 40 item 1: whose filter refused it --------------------------------

doubted := [rt.with_items(probe_says("EPERM(1)"), [object.union(counts(1, 0, 1, 0), {
	"kind": "tracer-syscall-unconfirmed",
	"summary": "the kernel refused bpf 1 time(s); unconfirmed: the probe's process ran before the tracer watched it",
})])]

test_doubted_refusal_is_unconfirmed if {
	f := criteria.unconfirmed_kernel_view_doubted with input as on_runtime("runc", doubted, tracer_on)
		with data.catalog as rt.catalog
	some x in f
	x.criterion == "hardened-runtime"
	x.probe == "syscalls.bpf"
	contains(x.msg, "whose seccomp filter refused its call is not established")
	contains(x.msg, "ran before the tracer watched it")
	not data.sandcheck.release.pass with input as on_runtime("runc", doubted, tracer_on)
		with data.catalog as rt.catalog
}

test_doubted_refusal_is_not_also_called_blind if {
	f := criteria.unconfirmed_no_kernel_view with input as on_runtime("runc", doubted, tracer_on)
		with data.catalog as rt.catalog
	count(f) == 0
}

test_confirmed_refusal_is_not_doubted if {
	r := [rt.with_items(probe_says("EPERM(1)"), [counts(1, 0, 1, 0)])]
	f := criteria.unconfirmed_kernel_view_doubted with input as on_runtime("runc", r, tracer_on)
		with data.catalog as rt.catalog
	count(f) == 0
}
