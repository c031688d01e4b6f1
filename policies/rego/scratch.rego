# isolated-scratch and controlled-output from the runtime view. Writable
# storage must be per-run memory (tmpfs) so nothing carries into the next
# run; a writable host mount also lets the box publish files past the
# output broker. The persistence probe shows what survives in practice.
package sandcheck.criteria

import rego.v1

persistent_writable(view) := [m |
	some m in list(view.mounts)
	m.type != "tmpfs"
	m.read_only != true
]

deny_shared_scratch contains finding("isolated-scratch", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	some m in persistent_writable(v.view)
	msg := sprintf("sandbox %s has writable %s storage %s at %s that outlives the run (runtime view)", [v.name, m.type, m.source, m.destination])
}

pass_scratch contains finding("isolated-scratch", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	count(persistent_writable(v.view)) == 0
	msg := sprintf("sandbox %s writes only to per-run tmpfs (runtime view)", [v.name])
}

deny_output_bypass contains finding("controlled-output", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	some m in host_mounts(v.view)
	m.read_only != true
	msg := sprintf("sandbox %s can write host path %s directly, past the output broker (runtime view)", [v.name, m.source])
}

pass_output contains finding("controlled-output", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	every m in host_mounts(v.view) {
		m.read_only == true
	}
	msg := sprintf("sandbox %s has no writable host path: output leaves only through the harness (runtime view)", [v.name])
}

unconfirmed_storage contains finding(c, "", msg) if {
	some v in views
	unknown_fact(v.view, "mounts")
	some c in ["isolated-scratch", "controlled-output"]
	msg := sprintf("sandbox %s: the runtime could not tell its mounts", [v.name])
}
