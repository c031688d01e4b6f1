# Exposure facts: beside its honeytoken check, the host reports which of the
# files it planted for a probe (the honey home, the service-account token)
# the runtime mounts into the box, and where (runtime/honeytoken-exposed;
# engine/honey_exposure.go). A probe that proved it read none of them and
# says "blocked" has shown nothing while the file is in the box: absence of
# a proof is not evidence. Its claim stands only where another host fact
# confirms the refusal (path_independent_block, netpath.rego).
package sandcheck.criteria

import rego.v1

exposed_files(r) := [i |
	some i in evidence(r)
	i.source == "runtime"
	i.kind == "honeytoken-exposed"
]

unsettled_exposure(g) if {
	g.effective == "blocked"
	count(exposed_files(g.result)) > 0
	not path_independent_block(g.result)
}

unconfirmed_exposed_honeytoken contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_exposure(g)
	r := g.result
	some c in g.criteria
	some i in exposed_files(r)
	msg := sprintf("probe %s reported blocked but no host fact confirms it, and the planted file is in the box: %s/%s: %s", [r.probe, i.source, i.kind, i.summary])
}
