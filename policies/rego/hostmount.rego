# no-host-mount from the runtime view: no bind mount of a host path (the
# harness's read-only probe delivery aside), not privileged, /proc masked.
package sandcheck.criteria

import rego.v1

# masked_required are /proc files a sandbox must not read (the runtime's
# defaults); host.proc-unmasked probes them from inside.
masked_required := {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"}

deny_host_mount contains finding("no-host-mount", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	some m in host_mounts(v.view)
	msg := sprintf("sandbox %s mounts host path %s at %s %s (runtime view)", [v.name, m.source, m.destination, rw(m)])
}

deny_privileged_host contains finding("no-host-mount", "", msg) if {
	some v in views
	v.view.privileged == true
	msg := sprintf("sandbox %s is privileged: every host device is reachable (runtime view)", [v.name])
}

deny_unmasked_proc contains finding("no-host-mount", "", msg) if {
	some v in views
	known_fact(v.view, "masked_paths")
	missing := masked_required - {p | some p in list(v.view.masked_paths)}
	count(missing) > 0
	msg := sprintf("sandbox %s does not mask %s (runtime view)", [v.name, concat(", ", sort(missing))])
}

unconfirmed_mounts contains finding("no-host-mount", "", msg) if {
	some v in views
	some field in ["mounts", "masked_paths"]
	unknown_fact(v.view, field)
	msg := sprintf("sandbox %s: the runtime could not tell its %s", [v.name, field])
}

pass_host_mount contains finding("no-host-mount", "", msg) if {
	some v in views
	known_fact(v.view, "mounts")
	count(host_mounts(v.view)) == 0
	msg := sprintf("sandbox %s mounts no host path (runtime view)", [v.name])
}
