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

seen := [rt.with_items(rt.res("syscalls.bpf", "blocked"), [rt.item("tracer", "tracer-syscall", "blocked")])]

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
