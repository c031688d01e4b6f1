# Path facts: before an egress or metadata probe runs, the host dials, from
# inside the sandbox's network namespace, the canary addresses the probe is
# handed (the catalog's host: netpath:<path>; engine/netpath.go). A canary
# that saw nothing is no evidence that the box could not reach it (absence
# is not evidence); a path the host found open is. A probe's "blocked" then
# stands only where another host fact confirms the refusal: something the
# host saw the sandbox's own confinement do (the tracer seeing the
# runtime's filter refuse the call, a runtime fact), not the probe's word.
# A closed path (refused or unreachable) confirms blocked where the path is
# the probe's own (runtime/netpath-closed indicates blocked).
package sandcheck.criteria

import rego.v1

open_paths(r) := [i |
	some i in evidence(r)
	i.source == "runtime"
	i.kind == "netpath-open"
]

# path_independent_block is a host confirmation of the refusal that is not
# itself a path fact.
path_independent_block(r) if {
	some i in host_blocked(r)
	not startswith(i.kind, "netpath-")
}

unsettled_path(g) if {
	g.effective == "blocked"
	count(open_paths(g.result)) > 0
	not path_independent_block(g.result)
}

unconfirmed_open_path contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_path(g)
	r := g.result
	some c in g.criteria
	some i in open_paths(r)
	msg := sprintf("probe %s reported blocked but no host fact confirms it, and the path is open: %s/%s: %s", [r.probe, i.source, i.kind, i.summary])
}

# No check, no pass: a runner whose sandboxes' network namespace the host
# cannot enter (kubernetes, wrapper, command, opensandbox, gateway) gives no
# path fact, and the engine says so on the result (runtime/netpath-none).
# There a probe's "blocked" was held on its word alone; now it stands only
# where another host fact confirms the refusal.
no_path_fact(r) := [i |
	some i in evidence(r)
	i.source == "runtime"
	i.kind == "netpath-none"
]

unsettled_no_path(g) if {
	g.effective == "blocked"
	count(no_path_fact(g.result)) > 0
	not path_independent_block(g.result)
}

unconfirmed_no_path_fact contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_no_path(g)
	r := g.result
	some c in g.criteria
	some i in no_path_fact(r)
	msg := sprintf("probe %s reported blocked but no host fact confirms it: %s/%s: %s", [r.probe, i.source, i.kind, i.summary])
}
