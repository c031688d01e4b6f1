# bounded-resources from the runtime view: every sandbox has a pids, memory
# and CPU limit. The fork-bomb and memory probes show the limits hold.
package sandcheck.criteria

import rego.v1

limits := {"pids_limit": "process", "memory_bytes": "memory", "nano_cpus": "CPU"}

deny_unbounded contains finding("bounded-resources", "", msg) if {
	some v in views
	some field, what in limits
	known_fact(v.view, field)
	object.get(v.view, field, 0) <= 0
	msg := sprintf("sandbox %s has no %s limit (runtime view %s)", [v.name, what, field])
}

unconfirmed_limits contains finding("bounded-resources", "", msg) if {
	some v in views
	some field, what in limits
	unknown_fact(v.view, field)
	msg := sprintf("sandbox %s: the runtime could not tell its %s limit", [v.name, what])
}

pass_bounded contains finding("bounded-resources", "", msg) if {
	some v in views
	every field, _ in limits {
		known_fact(v.view, field)
		object.get(v.view, field, 0) > 0
	}
	msg := sprintf("sandbox %s is bounded: %d processes, %d bytes of memory, %d nano-CPUs (runtime view)", [v.name, v.view.pids_limit, v.view.memory_bytes, v.view.nano_cpus])
}
