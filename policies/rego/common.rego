# Shared readings of the run record for the criteria in package
# sandcheck.criteria. Rules whose names start with deny_, unconfirmed_, warn_,
# pass_ or info_ are findings (see release.rego); helpers here must not use
# those prefixes.
#
# The record is written by the harness, but every result in it started as the
# output of code inside the sandbox, and the record itself may be forged: the
# catalog (data.catalog) and the profiles (data.sandcheck.profiles), not the
# record, say what each probe tests and what a profile demands.
package sandcheck.criteria

import rego.v1

profile_name := object.get(input, ["target", "profile"], "")

# profile is undefined when the record names no known profile; the
# attributable-policy criterion fails such a record.
profile := data.sandcheck.profiles.profiles[profile_name]

results := input.results if {
	is_array(input.results)
} else := []

sandboxes := input.sandboxes if {
	is_array(input.sandboxes)
} else := []

# views are the runtime's own descriptions of the sandboxes (host-observed).
views := [{"name": s.name, "view": s.runtime_view, "probes": object.get(s, "probes", [])} |
	some s in sandboxes
	is_object(object.get(s, "runtime_view", null))
]

# finding is one entry of a deny_, unconfirmed_, warn_, pass_ or info_ rule.
# Every finding about a probe result starts its msg with "probe <id> ": the
# reports rely on it to tie reasons to results.
finding(c, probe, msg) := {"criterion": c, "probe": probe, "msg": msg}

# integrity_finding is a finding no waiver may excuse: a forged or
# self-contradicting record is not a risk someone can accept.
integrity_finding(c, probe, msg) := {"criterion": c, "probe": probe, "msg": msg, "waivable": false}

list(x) := x if {
	is_array(x)
} else := []

# known_fact holds when the runtime could tell field (it lists the fields it
# could not in "unknown").
known_fact(view, field) if not field in list(object.get(view, "unknown", []))

# unknown_fact is the opposite of known_fact, for unconfirmed_ rules.
unknown_fact(view, field) if field in list(object.get(view, "unknown", []))

# probe_mount is the harness's own read-only delivery of the probe binary.
probe_mount(m) if {
	m.destination == "/.sandcheck"
	m.read_only == true
}

# inputs_mount is the harness's own read-only bind of the run's inputs
# folder (the record's target.inputs): the platform handing the task its
# inputs, not a host path leaking in. A writable one still counts.
inputs_mount(m) if {
	i := input.target.inputs
	m.destination == i.path
	m.source == i.source
	i.read_only == true
	m.read_only == true
}

host_mounts(view) := [m |
	some m in list(view.mounts)
	m.type == "bind"
	not probe_mount(m)
	not inputs_mount(m)
]

rw(m) := "read-only" if m.read_only == true

else := "writable"
