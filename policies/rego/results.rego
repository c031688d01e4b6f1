# Release criteria: grades one run record (input) against the probe catalog
# (data.catalog) and produces the verdict. Written conftest-style: deny_* rules
# fail a criterion, warn_* rules leave it unconfirmed, and each finding names
# the criterion it counts against.
#
# input:         the run record (evidence.Record as JSON).
# data.catalog:  {"criteria": [ordered criterion IDs],
#                 "probes": {id: {"category", "criterion", "severity", "expect"}}}
#
# The record is written by the harness, but every result in it started as the
# output of code inside the sandbox, and the record itself may be forged: the
# catalog, not the record, says what each probe tests and what it must do.
package sandcheck.release

import rego.v1

# integrity collects findings about results that no known criterion can
# carry (an unknown probe claiming an unknown criterion). It appears in the
# verdict only when it has findings, so a forged result never vanishes.
integrity := "record-integrity"

outcomes := {"blocked", "escaped", "inconclusive", "not-applicable"}

profile := object.get(input, ["target", "profile"], "")

results := input.results if {
	is_array(input.results)
} else := []

# --- one result -------------------------------------------------------------

evidence(r) := r.evidence if {
	is_array(r.evidence)
} else := []

# host_escaped lists the host-observed items (any source but the probe
# itself) that show the attempt succeeded.
host_escaped(r) := [i |
	some i in evidence(r)
	i.source != "probe"
	i.indicates == "escaped"
]

host_blocked(r) := [i |
	some i in evidence(r)
	i.source != "probe"
	i.indicates == "blocked"
]

# effective is the outcome the grade uses: host evidence of an escape
# outranks whatever the probe said about itself. A probe that could not
# report (inconclusive) is blocked when the host saw the sandbox stop it (for
# example the kernel OOM-killing the sandbox at its memory limit) and saw
# nothing escape.
effective(r) := "escaped" if {
	count(host_escaped(r)) > 0
} else := "blocked" if {
	r.outcome == "inconclusive"
	some i in host_blocked(r)
	i.kind in host_stops
} else := r.outcome

# host_stops are the host observations that show the sandbox itself stopped
# an attempt, enough to settle a probe that could not report.
host_stops := {"oom-killed"}

# expected comes from the catalog for the run's profile; the record's own
# expected value is only used for probes the catalog does not know (and those
# fail anyway).
expected(r) := o if {
	spec := data.catalog.probes[r.probe]
	o := object.get(spec.expect, profile, spec.expect["default"])
} else := r.expected

known(r) if data.catalog.probes[r.probe]

# criteria_of is every known criterion the result counts against: the one
# the record claims and the one the catalog assigns (they differ only in a
# forged record, which then fails both).
criteria_of(r) := cs if {
	claimed := {c | c := r.criterion; c in data.catalog.criteria}
	assigned := {c | c := data.catalog.probes[r.probe].criterion}
	cs := claimed | assigned
	count(cs) > 0
} else := {integrity}

detail(r) := d if {
	d := object.get(r, "detail", "")
	d != ""
} else := "no detail"

cite(i) := sprintf("%s/%s shows %s: %s", [i.source, i.kind, i.indicates, i.summary])

contradicted(r) if {
	r.outcome == "blocked"
	count(host_escaped(r)) > 0
}

# escape_evidence cites what proves the escape: the host items if any, the
# probe's own report otherwise.
escape_evidence(r) := {cite(i) | some i in host_escaped(r)} if {
	count(host_escaped(r)) > 0
} else := {sprintf("self-reported: %s", [detail(r)])}

# finding is one deny or warn entry. Every message about a result starts
# with "probe <id> ": the reports rely on it to tie reasons to results.
finding(r, c, msg) := {"criterion": c, "probe": r.probe, "msg": msg}

# graded is every result with its effective outcome and criteria, worked
# out once; the rules below read these.
graded := [g |
	some r in results
	g := {
		"result": r,
		"effective": effective(r),
		"expected": expected(r),
		"criteria": criteria_of(r),
	}
]

# --- deny: the criterion fails ------------------------------------------------

# An attempt the profile must block got through.
deny_escaped contains finding(r, c, msg) if {
	some g in graded
	g.effective == "escaped"
	g.expected == "blocked"
	r := g.result
	not contradicted(r)
	some c in g.criteria
	some e in escape_evidence(r)
	msg := sprintf("probe %s escaped (expected blocked): %s", [r.probe, e])
}

# The probe said blocked while the host saw it get through: the probe is
# wrong or lying, and the host wins.
deny_contradiction contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	contradicted(r)
	some c in g.criteria
	some i in host_escaped(r)
	msg := sprintf("probe %s reported blocked but %s/%s shows escaped: %s", [r.probe, i.source, i.kind, i.summary])
}

# A workload the profile must allow was blocked: the sandbox is unusable for
# its task.
deny_blocked_workload contains finding(r, c, msg) if {
	some g in graded
	g.effective == "blocked"
	g.expected == "escaped"
	r := g.result
	some c in g.criteria
	msg := sprintf("probe %s was blocked but must succeed (expected escaped): self-reported: %s", [r.probe, detail(r)])
}

deny_unknown_probe contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	not known(r)
	some c in g.criteria
	msg := sprintf("probe %s is not in the catalog (the record may be forged)", [r.probe])
}

deny_mismatch contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	spec := data.catalog.probes[r.probe]
	some field in ["category", "criterion"]
	r[field] != spec[field]
	some c in g.criteria
	msg := sprintf("probe %s claims %s %q but the catalog says %q (the record may be forged)", [r.probe, field, r[field], spec[field]])
}

deny_mismatch contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	known(r)
	r.expected != g.expected
	some c in g.criteria
	msg := sprintf("probe %s claims expected %q but the catalog expects %q for profile %q (the record may be forged)", [r.probe, r.expected, g.expected, profile])
}

deny_invalid_outcome contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	not r.outcome in outcomes
	some c in g.criteria
	msg := sprintf("probe %s reported unknown outcome %q", [r.probe, r.outcome])
}

deny contains f if some f in deny_escaped

deny contains f if some f in deny_contradiction

deny contains f if some f in deny_blocked_workload

deny contains f if some f in deny_unknown_probe

deny contains f if some f in deny_mismatch

deny contains f if some f in deny_invalid_outcome

# --- warn: the criterion cannot be confirmed ----------------------------------

# Inconclusive is never a pass.
warn_inconclusive contains finding(r, c, msg) if {
	some g in graded
	g.effective == "inconclusive"
	r := g.result
	some c in g.criteria
	msg := sprintf("probe %s was inconclusive: %s", [r.probe, detail(r)])
}

# The probe claims success but the host saw it stopped and nothing on the
# host confirms the escape: neither side can be taken as settled.
warn_disputed contains finding(r, c, msg) if {
	some g in graded
	r := g.result
	r.outcome == "escaped"
	count(host_escaped(r)) == 0
	some c in g.criteria
	some i in host_blocked(r)
	msg := sprintf("probe %s reported escaped but %s/%s shows blocked: %s", [r.probe, i.source, i.kind, i.summary])
}

warn contains f if some f in warn_inconclusive

warn contains f if some f in warn_disputed

# --- criteria and verdict -----------------------------------------------------

all_criteria := array.concat(data.catalog.criteria, [integrity])

# Per-criterion tables, keyed by criterion ID.

deny_msgs := {c: sort({f.msg | some f in deny; f.criterion == c}) | some c in all_criteria}

warn_msgs := {c: sort({f.msg | some f in warn; f.criterion == c}) | some c in all_criteria}

graded_of := {c: [g | some g in graded; c in g.criteria] | some c in all_criteria}

# counted_of is the results that count: not-applicable ones are ignored.
counted_of := {c: [g | some g in graded_of[c]; g.effective != "not-applicable"] | some c in all_criteria}

status(c) := "fail" if {
	count(deny_msgs[c]) > 0
} else := "unconfirmed" if {
	count(warn_msgs[c]) > 0
} else := "not-tested" if {
	count(counted_of[c]) == 0
} else := "pass"

confirmations(g) := sort({sprintf("%s/%s", [i.source, i.kind]) |
	some i in evidence(g.result)
	i.source != "probe"
	i.indicates == g.effective
})

confirmation(g) := sprintf(" (confirmed by %s)", [concat(", ", confirmations(g))]) if {
	count(confirmations(g)) > 0
} else := ""

pass_msgs(c) := sort({sprintf("probe %s %s as expected%s", [g.result.probe, g.effective, confirmation(g)]) |
	some g in counted_of[c]
})

not_applicable_msgs(c) := sort({sprintf("probe %s not applicable: %s", [g.result.probe, detail(g.result)]) |
	some g in graded_of[c]
	g.effective == "not-applicable"
})

reasons(c, "fail") := array.concat(deny_msgs[c], warn_msgs[c])

reasons(c, "unconfirmed") := warn_msgs[c]

reasons(c, "not-tested") := ["no probe results"] if {
	count(graded_of[c]) == 0
} else := not_applicable_msgs(c)

reasons(c, "pass") := array.concat(pass_msgs(c), not_applicable_msgs(c))

grade(c) := {"id": c, "status": s, "reasons": reasons(c, s)} if s := status(c)

integrity_grades := [grade(integrity)] if {
	count(deny_msgs[integrity]) > 0
} else := []

# criteria lists every catalog criterion, in catalog order.
criteria := array.concat([grade(c) | some c in data.catalog.criteria], integrity_grades)

# pass holds when at least one criterion was tested and none failed or is
# unconfirmed; not-tested criteria do not block a release on their own, but a
# run that tested nothing proves nothing.
default pass := false

pass if {
	some g in criteria
	g.status == "pass"
	every g in criteria {
		not g.status in {"fail", "unconfirmed"}
	}
}

# result_grades gives each result's effective outcome, in record order, so
# the reports and the Ginkgo specs show what the policy decided per probe.
result_grades := [{"probe": g.result.probe, "effective": g.effective, "expected": g.expected} | some g in graded]

verdict := {"pass": pass, "criteria": criteria, "results": result_grades}
