# Evidence gaps: criteria the design requires host evidence for must not
# rest on the probes' self-reports alone, and a profile's required probes
# must have run.
package sandcheck.criteria

import rego.v1

# host_view_criteria are graded from the runtime's view as well as from
# probes; without a view, a blocked probe is only the box's own word.
host_view_criteria := {
	"no-ambient-cloud-identity", "no-host-mount", "bounded-resources", "default-deny-egress",
	"immutable-approved-base", "isolated-scratch", "controlled-output", "hardened-runtime",
}

unconfirmed_no_runtime_view contains finding(c, "", msg) if {
	count(views) == 0
	some c in host_view_criteria
	some g in counted
	c in g.criteria
	g.effective == "blocked"
	msg := sprintf("no sandbox in the record carries the runtime's view: %s rests on the probes' self-reports", [c])
}

unconfirmed_no_runtime_view contains finding(c, "", msg) if {
	some s in sandboxes
	not is_object(object.get(s, "runtime_view", null))
	some id in list(object.get(s, "probes", []))
	c := data.catalog.probes[id].criterion
	c in host_view_criteria
	msg := sprintf("sandbox %s has no runtime view: %s rests on the self-report of probe %s", [s.name, c, id])
}

# Coverage: a pattern the profile names that matches catalog probes, none of
# which ran. Advisory, because partial runs (--probes) are legitimate; use
# --fail-on-warn to make it gate.
warn_coverage contains finding(c, "", msg) if {
	some kind, patterns in {"blocked": object.get(profile, "must_block", []), "escaped": object.get(profile, "must_succeed", [])}
	some p in patterns
	ids := {id | some id, _ in data.catalog.probes; glob.match(p, ["."], id)}
	count(ids) > 0
	ran := {r.probe | some r in results}
	count(ids & ran) == 0
	some id in ids
	c := data.catalog.probes[id].criterion
	msg := sprintf("profile %s requires probes matching %s to be %s; none ran", [profile_name, p, kind])
}
