# verified-teardown from the host's teardown check of every sandbox: what
# survived Close is listed in teardown_leftovers; a check that itself failed
# leaves the criterion unconfirmed, and so does a sandbox no check ran for
# (teardown_checked unset: the runner has no teardown verifier, such as a
# command target without a list step, or the sandbox was never closed). An
# empty list means nothing was left only where the check ran.
package sandcheck.criteria

import rego.v1

leftovers(s) := list(object.get(s, "teardown_leftovers", []))

teardown_checked(s) if object.get(s, "teardown_checked", false) == true

check_failed(l) if contains(l, "check failed")

deny_leftover contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	some l in leftovers(s)
	not check_failed(l)
	msg := sprintf("sandbox %s left %s behind after teardown (teardown check)", [s.name, l])
}

unconfirmed_teardown contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	some l in leftovers(s)
	check_failed(l)
	msg := sprintf("sandbox %s: %s", [s.name, l])
}

pass_teardown contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	teardown_checked(s)
	count(leftovers(s)) == 0
	msg := sprintf("sandbox %s: the teardown check found nothing left", [s.name])
}

# No check, no pass: without the host's check nothing shows what survived
# the sandbox (a destroy that leaves the container running reads the same).
unconfirmed_teardown_unchecked contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	not teardown_checked(s)
	count(leftovers(s)) == 0
	msg := sprintf("sandbox %s: no teardown check ran after it was closed (the runner has no teardown verifier, e.g. a command target without a list step): nothing shows what survived it", [s.name])
}

deny_network_leftover contains finding("verified-teardown", "", msg) if {
	some l in list(object.get(input, "network_leftovers", []))
	not check_failed(l)
	msg := sprintf("the harness network left %s behind after teardown (teardown check)", [l])
}

unconfirmed_network_teardown contains finding("verified-teardown", "", msg) if {
	some l in list(object.get(input, "network_leftovers", []))
	check_failed(l)
	msg := sprintf("harness network: %s", [l])
}

# --- absence is not evidence ---------------------------------------------------
#
# A teardown, persistence or residue probe proves something by what it
# leaves: nothing found afterwards means the sandbox removed or refused the
# plant only if a plant was possible or made. The box controls the probe, so
# one that never tried (and says "blocked") leaves nothing as well. Such a
# probe's "blocked" counts only where a host item confirms it with its
# precondition met: the harness's own view shows the box had no way to make
# the plant (the teardown item's data says precondition "no-avenue"), or
# the host held the thing read-only (the root filesystem, the inputs), or
# the host saw the plant itself before teardown (precondition "seen": the
# runner found a thing of that kind carrying the probe's token before it
# closed the sandbox). A carry-over probe (catalog host kind runtime:carryover-*:
# a plant in one task that the next task looks for, whatever its family)
# counts only where the harness ran the check in a fresh sandbox the
# plant's box had no way to reach (its carryover item's precondition
# "no-avenue"). Otherwise the result is unconfirmed, never a pass, and the
# finding names the marker that is missing.

absence_families := {"teardown", "persistence"}

absence_probe(r) if data.catalog.probes[r.probe].category in absence_families

absence_probe(r) if {
	some h in object.get(data.catalog.probes[r.probe], "host", [])
	startswith(h, "runtime:carryover-")
}

settling_preconditions := {"no-avenue", "seen"}

# absence_unmet holds for a host item that reports only that nothing was
# found (or changed) afterwards, without the marker that makes the absence
# mean anything.
absence_unmet(i) if {
	i.source == "teardown"
	startswith(i.kind, "teardown.")
	not object.get(object.get(i, "data", {}), "precondition", "") in settling_preconditions
}

absence_unmet(i) if {
	i.source == "runtime"
	startswith(i.kind, "carryover-")
	object.get(object.get(i, "data", {}), "precondition", "") != "no-avenue"
}

absence_unmet(i) if {
	i.source == "inputs"
	i.kind == "inputs:intact"
	not input.target.inputs.read_only == true
}

# absence_confirmations are the host items that settle an absence probe's
# "blocked".
absence_confirmations(r) := [i |
	some i in evidence(r)
	i.source != "probe"
	i.indicates == "blocked"
	not absence_unmet(i)
]

teardown_kinds(r) := {k |
	some h in object.get(data.catalog.probes[r.probe], "host", [])
	k := trim_prefix(h, "teardown:")
	k != h
}

settled_kind(r, k) if {
	some i in absence_confirmations(r)
	i.source == "teardown"
	i.kind == concat("", ["teardown.", k])
}

# unsettled_absence holds for a blocked absence-probe result that the host
# evidence its catalog entry names does not confirm: every teardown kind
# needs its own settled item, any other probe one confirming item. (An
# absence probe whose catalog names no host evidence has none: the host has
# no view of it, and its "blocked" is the box's word only.)
unsettled_absence(g) if {
	g.effective == "blocked"
	absence_probe(g.result)
	some k in teardown_kinds(g.result)
	not settled_kind(g.result, k)
}

unsettled_absence(g) if {
	g.effective == "blocked"
	absence_probe(g.result)
	count(teardown_kinds(g.result)) == 0
	count(absence_confirmations(g.result)) == 0
}

# missing_marker says, for the finding, what the host lacked.
missing_marker(r, k) := sprintf("%s/%s: %s", [i.source, i.kind, i.summary]) if {
	some i in evidence(r)
	i.source == "teardown"
	i.kind == concat("", ["teardown.", k])
} else := sprintf("no teardown/teardown.%s item: the host made no %s check", [k, k])

unconfirmed_absence contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_absence(g)
	r := g.result
	some k in teardown_kinds(r)
	not settled_kind(r, k)
	some c in g.criteria
	msg := sprintf("probe %s reported blocked but the host has no marker that a %s plant was impossible or seen: %s", [r.probe, k, missing_marker(r, k)])
}

unconfirmed_absence contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_absence(g)
	r := g.result
	count(teardown_kinds(r)) == 0
	some c in g.criteria
	seen := [sprintf("%s/%s: %s", [i.source, i.kind, i.summary]) |
		some i in evidence(r)
		i.source != "probe"
	]
	msg := sprintf("probe %s reported blocked but no host fact confirms the plant was refused (nothing found afterwards proves nothing while the box could plant): %s", [r.probe, concat("; ", seen_or_none(seen))])
}

seen_or_none(seen) := seen if count(seen) > 0

else := ["the host has no view of it (no host item)"]
