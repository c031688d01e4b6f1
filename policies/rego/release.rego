# The verdict: gathers every finding of the built-in criteria
# (data.sandcheck.criteria) and of user policies (data.sandcheck.user and
# the packages under it), applies waivers (data.grading.waivers), and grades
# each criterion.
#
# Findings come from rules named by kind, conftest-style:
#   deny_*         the criterion fails
#   unconfirmed_*  the criterion cannot be confirmed (never a pass)
#   warn_*         advisory: listed in verdict.warnings; fails only with --fail-on-warn
#   pass_*         evidence that the criterion holds
#   info_*         context shown with the criterion, no effect on it
# A bare deny, warn, ... rule counts too. A finding is a string (counted
# against the criterion "user-policy") or an object {criterion, probe, msg}.
package sandcheck.release

import rego.v1

kinds := {"deny", "unconfirmed", "warn", "pass", "info"}

blocking_kinds := {"deny", "unconfirmed"}

integrity := data.sandcheck.criteria.integrity

user_criterion := "user-policy"

rule_kind(name) := k if {
	some k in kinds
	name == k
} else := k if {
	some k in kinds
	startswith(name, concat("", [k, "_"]))
}

# normalize turns one rule entry into a finding with every field set.
normalize(k, x) := {
	"kind": k,
	"criterion": object.get(x, "criterion", user_criterion),
	"probe": object.get(x, "probe", ""),
	"msg": object.get(x, "msg", sprintf("%v", [x])),
	"waivable": object.get(x, "waivable", true) != false,
} if {
	is_object(x)
} else := {"kind": k, "criterion": user_criterion, "probe": "", "msg": x, "waivable": true} if {
	is_string(x)
} else := {"kind": k, "criterion": user_criterion, "probe": "", "msg": sprintf("%v", [x]), "waivable": true}

builtin_findings contains normalize(k, x) if {
	some name, entries in data.sandcheck.criteria
	k := rule_kind(name)
	is_set(entries)
	some x in entries
}

user_entries contains [path, normalize(k, x)] if {
	walk(data.sandcheck.user, [path, entries])
	count(path) > 0
	name := path[count(path) - 1]
	is_string(name)
	k := rule_kind(name)
	some x in set_or_array(entries)
}

# A user policy adds denials and warnings to the built-in criteria, never a
# pass: a user pass for one of them would turn not-tested into pass and
# take its warning away. The loader refuses pass_* rules that could name
# one; whatever still reaches here (nested data, say) is dropped from the
# grading and listed in user_refused, which the grader refuses.
builtin_criteria := {c | some c in data.catalog.criteria} | {integrity}

overreach(f) if {
	f.kind == "pass"
	f.criterion in builtin_criteria
}

user_findings contains f if {
	some [_, f] in user_entries
	not overreach(f)
}

user_refused contains {"path": path, "criterion": f.criterion, "msg": f.msg} if {
	some [path, f] in user_entries
	overreach(f)
}

set_or_array(x) := x if is_set(x)

else := x if is_array(x)

else := []

findings := builtin_findings | user_findings

# --- waivers --------------------------------------------------------------------

# waivers are the accepted residual risks, as the Go side loaded them:
# [{id, criterion, probe, target, owner, reason, expires, expires_at}]. id
# is "file:line"; expires_at is the RFC 3339 instant the waiver stops.
default waivers := []

waivers := data.grading.waivers

target_name := object.get(input, ["target", "name"], "")

active(w) if time.parse_rfc3339_ns(w.expires_at) > time.now_ns()

for_this_target(w) if w.target == target_name

probe_matches(p, _) if p == ""

probe_matches(p, id) if {
	p != ""
	id != ""
	glob.match(p, ["."], id)
}

waives(w, f) if {
	f.kind in blocking_kinds
	f.waivable
	for_this_target(w)
	object.get(w, "criterion", "") in {"", f.criterion}
	probe_matches(object.get(w, "probe", ""), f.probe)
}

applied := {[w.id, f] |
	some w in waivers
	active(w)
	some f in findings
	waives(w, f)
}

waived := {f | some [_, f] in applied}

expired := [w |
	some w in waivers
	for_this_target(w)
	not active(w)
]

waiver_of(id) := w if {
	some w in waivers
	w.id == id
}

waived_msg(f) := sprintf("%s [waived by %s: owner %s, expires %s: %s]", [f.msg, w.id, w.owner, w.expires, w.reason]) if {
	some [id, g] in applied
	g == f
	w := waiver_of(id)
}

waiver_view(w) := {k: object.get(w, k, "") | some k in ["id", "criterion", "probe", "target", "owner", "reason", "expires"]}

applied_waivers := [object.union(waiver_view(w), {"waived": sort({f.msg | some [id, f] in applied; id == w.id})}) |
	some w in waivers
	active(w)
	waiver_used(w.id)
]

expired_waivers := [object.union(waiver_view(w), {"waived": []}) | some w in expired]

# An expired waiver says so next to every finding it would have waived.
expired_notes contains {"criterion": f.criterion, "msg": msg} if {
	some w in expired
	some f in findings
	waives(w, f)
	msg := sprintf("waiver %s (owner %s) expired on %s and no longer applies", [w.id, w.owner, w.expires])
}

# --- criteria and verdict -------------------------------------------------------

msgs(c, kind) := sort({f.msg | some f in findings; f.criterion == c; f.kind == kind; not f in waived})

waived_msgs(c) := sort({waived_msg(f) | some f in waived; f.criterion == c})

notes(c) := sort({n.msg | some n in expired_notes; n.criterion == c})

extra_criteria := sort({f.criterion |
	some f in findings
	f.kind != "info"
	not f.criterion in data.catalog.criteria
})

all_criteria := array.concat(data.catalog.criteria, extra_criteria)

status(c) := "fail" if {
	count(msgs(c, "deny")) > 0
} else := "unconfirmed" if {
	count(msgs(c, "unconfirmed")) > 0
} else := "waived" if {
	count(waived_msgs(c)) > 0
} else := "pass" if {
	count(msgs(c, "pass")) > 0
} else := "not-tested"

reasons(c, "fail") := array.concat(array.concat(msgs(c, "deny"), msgs(c, "unconfirmed")), array.concat(notes(c), waived_msgs(c)))

reasons(c, "unconfirmed") := array.concat(array.concat(msgs(c, "unconfirmed"), notes(c)), waived_msgs(c))

reasons(c, "waived") := array.concat(waived_msgs(c), array.concat(msgs(c, "pass"), msgs(c, "info")))

reasons(c, "pass") := array.concat(msgs(c, "pass"), msgs(c, "info"))

reasons(c, "not-tested") := ["no probe results"] if {
	count(msgs(c, "info")) == 0
} else := msgs(c, "info")

grade(c) := {"id": c, "status": s, "reasons": reasons(c, s)} if s := status(c)

criteria := [grade(c) | some c in all_criteria]

# pass holds when some probe result settled something and no criterion
# failed or is unconfirmed. A not-tested criterion does not block a release
# on its own (it warns), but a run that settled nothing proves nothing.
default pass := false

pass if {
	count(data.sandcheck.criteria.counted) > 0
	every g in criteria {
		not g.status in {"fail", "unconfirmed"}
	}
}

# soon_ns is how close to expiry a waiver starts to warn: 14 days.
soon_ns := 1209600000000000

warning_set contains f.msg if {
	some f in findings
	f.kind == "warn"
}

warning_set contains msg if {
	some g in criteria
	g.status == "not-tested"
	msg := sprintf("criterion %s was not tested: %s", [g.id, concat("; ", g.reasons)])
}

warning_set contains msg if {
	some w in waivers
	for_this_target(w)
	active(w)
	time.parse_rfc3339_ns(w.expires_at) - time.now_ns() < soon_ns
	msg := sprintf("waiver %s (owner %s) expires on %s", [w.id, w.owner, w.expires])
}

warning_set contains msg if {
	some w in waivers
	for_this_target(w)
	active(w)
	not waiver_used(w.id)
	msg := sprintf("waiver %s (owner %s) matches no finding of this run", [w.id, w.owner])
}

# A waiver that reaches a whole criterion (admitted only with
# --allow-criterion-waivers) takes that criterion out of the gate: wherever
# one applied, the verdict warns, so the console and every report say so.
warning_set contains msg if {
	some w in waivers
	waiver_used(w.id)
	whole_criterion_waiver(w)
	msg := sprintf("waiver %s (owner %s) waives the whole criterion %s (admitted by --allow-criterion-waivers): its findings do not gate this run", [w.id, w.owner, concat(", ", sort(waived_criteria(w)))])
}

# Waivers are judged together too, as the loader judges them: where the
# active waivers of this target together reach every probe of a criterion
# (teardown.[a-m]* and teardown.[n-z]*, or one waiver per probe), the set
# waives the whole criterion though no waiver alone does, and the verdict
# warns the same way, naming every waiver of the set.
warning_set contains msg if {
	some c in data.catalog.criteria
	set_emptied(c)
	ws := set_of(c)
	count(ws) > 1
	not single_whole(c)
	some w in ws
	waiver_used(w.id)
	msg := sprintf("waiver set %s (owners %s) waives the whole criterion %s (admitted by --allow-criterion-waivers): its findings do not gate this run", [
		concat(", ", sort({v.id | some v in ws})), concat(", ", sort({v.owner | some v in ws})), c,
	])
}

# set_of is the active waivers of this target that reach probes of c.
set_of(c) := {w |
	some w in waivers
	active(w)
	for_this_target(w)
	some id in probes_of(c)
	reaches(w, c, id)
}

reaches(w, c, id) if {
	object.get(w, "criterion", "") in {"", c}
	p := object.get(w, "probe", "")
	p != ""
	glob.match(p, ["."], id)
}

set_emptied(c) if {
	count(probes_of(c)) > 0
	every id in probes_of(c) {
		some w in set_of(c)
		reaches(w, c, id)
	}
}

# single_whole holds where one waiver of the set already waives c whole
# (and warns so itself).
single_whole(c) if {
	some w in set_of(c)
	whole_criterion_waiver(w)
	c in waived_criteria(w)
}

# whole_criterion_waiver holds, as the loader reads it, for a waiver naming
# a criterion and no probe, or a probe glob matching probes of more than
# one criterion or every probe of one.
whole_criterion_waiver(w) if {
	object.get(w, "probe", "") == ""
	object.get(w, "criterion", "") != ""
}

whole_criterion_waiver(w) if count(glob_criteria(object.get(w, "probe", ""))) > 1

whole_criterion_waiver(w) if {
	some c in glob_criteria(object.get(w, "probe", ""))
	count(probes_of(c)) == count({id | some id in probes_of(c); glob.match(w.probe, ["."], id)})
}

glob_criteria(p) := {s.criterion |
	p != ""
	some id, s in data.catalog.probes
	glob.match(p, ["."], id)
}

probes_of(c) := {id | some id, s in data.catalog.probes; s.criterion == c}

waived_criteria(w) := {w.criterion} if {
	object.get(w, "probe", "") == ""
} else := glob_criteria(w.probe)

# A stored run re-graded with other user policies than it ran with: the
# verdict is the current policies', the evidence was gathered under the old.
warning_set contains msg if {
	recorded := object.get(input, ["tool", "user_policy_version"], "")
	current := object.get(data.grading, "user_policy_version", "")
	recorded != current
	msg := sprintf("the record names user policy %q but it was graded with user policy %q", [recorded, current])
}

warnings := sort(warning_set)

waiver_used(id) if {
	some [i, _] in applied
	i == id
}

# result_grades gives each result's effective outcome, in record order, so
# the reports and the Ginkgo specs show what the policy decided per probe.
# A "blocked" that an unconfirmed finding names (no host check confirms
# it) reads "unconfirmed", never the outcome its criterion could not
# confirm; waived or not, the host did not confirm it. An escape is never
# shown as anything less.
result_grades := [{"probe": g.result.probe, "effective": shown_outcome(g), "expected": g.expected} | some g in data.sandcheck.criteria.graded]

shown_outcome(g) := "unconfirmed" if {
	g.effective == "blocked"
	some f in findings
	f.kind == "unconfirmed"
	f.probe == g.result.probe
} else := g.effective

verdict := {
	"pass": pass,
	"criteria": criteria,
	"results": result_grades,
	"warnings": warnings,
	"waivers": applied_waivers,
	"expired_waivers": expired_waivers,
}
