# Probe results: each result graded by its effective outcome (host evidence
# outranks the probe's self-report) against what the profile expects. Every
# criterion that has probes is graded here; the record-level rules in the
# other files add what the record itself shows.
package sandcheck.criteria

import rego.v1

# integrity collects findings about results that no known criterion can
# carry (an unknown probe claiming an unknown criterion).
integrity := "record-integrity"

outcomes := {"blocked", "escaped", "inconclusive", "not-applicable", "not-tested"}

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
# example the kernel OOM-killing the sandbox at its memory limit, or the
# CPU watchdog killing it at its budget) and saw nothing escape.
effective(r) := "escaped" if {
	count(host_escaped(r)) > 0
} else := "blocked" if {
	r.outcome == "inconclusive"
	some i in host_blocked(r)
	i.kind in host_stops
} else := host_decided(r) if {
	host_decides(r)
} else := r.outcome

# host_stops are the host observations that show the sandbox itself stopped
# an attempt, enough to settle a probe that could not report; a host check
# of the platform (a fact the box cannot see, e.g. where execd's port is
# published) settles the probe that names it.
host_stops := {"oom-killed", "cpu-budget-killed", "host-check"}

# catalog_expected is what the catalog says the run's profile expects; the
# harness wrote it into the record, so a different value there is forged.
catalog_expected(r) := "not-applicable" if {
	other_platform(r)
} else := o if {
	spec := data.catalog.probes[r.probe]
	o := object.get(spec.expect, profile_name, spec.expect["default"])
} else := r.expected

# other_platform holds for a probe of some platforms' own sandboxes only
# (the catalog's runners) when the run's runner is not one of them: nothing
# of it is there, so the profile expects it not-applicable.
other_platform(r) if {
	rs := object.get(data.catalog.probes[r.probe], "runners", [])
	count(rs) > 0
	not input.runner in rs
}

# expected is what the grade holds the result to: the catalog's entry for
# this very profile first, then the profile's must_succeed and must_block
# lists, then the catalog's default. The record's own value is used only for
# probes the catalog does not know (and those fail).
expected(r) := "not-applicable" if {
	other_platform(r)
} else := o if {
	o := data.catalog.probes[r.probe].expect[profile_name]
} else := "escaped" if {
	known(r)
	some p in profile.must_succeed
	glob.match(p, ["."], r.probe)
} else := "blocked" if {
	known(r)
	some p in profile.must_block
	glob.match(p, ["."], r.probe)
} else := catalog_expected(r)

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

# counted is the results that settle something: blocked or escaped. A run
# with none proves nothing.
counted := [g | some g in graded; g.effective in {"blocked", "escaped"}]

# --- deny: the criterion fails ------------------------------------------------

# An attempt the profile must block got through.
deny_escaped contains finding(c, r.probe, msg) if {
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
deny_contradiction contains integrity_finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	contradicted(r)
	some c in g.criteria
	some i in host_escaped(r)
	msg := sprintf("probe %s reported blocked but %s/%s shows escaped: %s", [r.probe, i.source, i.kind, i.summary])
}

# A workload the profile must allow was blocked: the sandbox is unusable for
# its task.
deny_blocked_workload contains finding(c, r.probe, msg) if {
	some g in graded
	g.effective == "blocked"
	g.expected == "escaped"
	r := g.result
	some c in g.criteria
	msg := sprintf("probe %s was blocked but must succeed (expected escaped): self-reported: %s", [r.probe, detail(r)])
}

deny_unknown_probe contains integrity_finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	not known(r)
	some c in g.criteria
	msg := sprintf("probe %s is not in the catalog (the record may be forged)", [r.probe])
}

deny_mismatch contains integrity_finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	spec := data.catalog.probes[r.probe]
	some field in ["category", "criterion"]
	r[field] != spec[field]
	some c in g.criteria
	msg := sprintf("probe %s claims %s %q but the catalog says %q (the record may be forged)", [r.probe, field, r[field], spec[field]])
}

deny_mismatch contains integrity_finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	known(r)
	want := catalog_expected(r)
	r.expected != want
	some c in g.criteria
	msg := sprintf("probe %s claims expected %q but the catalog expects %q for profile %q (the record may be forged)", [r.probe, r.expected, want, profile_name])
}

deny_invalid_outcome contains integrity_finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	not r.outcome in outcomes
	some c in g.criteria
	msg := sprintf("probe %s reported unknown outcome %q", [r.probe, r.outcome])
}

# --- unconfirmed: the criterion cannot be confirmed ---------------------------

# Inconclusive is never a pass.
unconfirmed_inconclusive contains finding(c, r.probe, msg) if {
	some g in graded
	g.effective == "inconclusive"
	r := g.result
	some c in g.criteria
	msg := sprintf("probe %s was inconclusive: %s", [r.probe, detail(r)])
}

# A probe the runner could not carry out (it lacks what the probe needs) is
# never a pass: its criterion cannot be confirmed.
unconfirmed_not_tested contains finding(c, r.probe, msg) if {
	some g in graded
	g.effective == "not-tested"
	r := g.result
	some c in g.criteria
	msg := sprintf("probe %s was not tested: %s", [r.probe, detail(r)])
}

# A probe's own "not applicable" decides nothing where the catalog expects
# the attempt to be made (blocked, or a workload through): the box controls the probe's output, and "io_uring
# is not built into this kernel" would otherwise hide a seccomp profile that
# lets io_uring through. Only a host fact confirms it: an item of the host's
# saying not-applicable (the kernel's syscall table lacks the syscall), or
# the harness's own record that the target declares no inputs or output
# folder.
host_not_applicable(r) if {
	some i in evidence(r)
	i.source != "probe"
	i.indicates == "not-applicable"
}

host_not_applicable(r) if {
	some i in evidence(r)
	i.source in {"inputs", "output"}
	i.kind in {"inputs-undeclared", "output-undeclared"}
}

unconfirmed_not_applicable contains finding(c, r.probe, msg) if {
	some g in graded
	g.effective == "not-applicable"
	g.expected != "not-applicable"
	r := g.result
	catalog_expected(r) != "not-applicable"
	not host_not_applicable(r)
	some c in g.criteria
	msg := sprintf("probe %s reported not-applicable but profile %s expects %s and no host fact confirms it: self-reported: %s", [r.probe, profile_name, g.expected, detail(r)])
}

# The probe claims success but the host saw it stopped and nothing on the
# host confirms the escape: neither side can be taken as settled.
unconfirmed_disputed contains finding(c, r.probe, msg) if {
	some g in graded
	r := g.result
	r.outcome == "escaped"
	count(host_escaped(r)) == 0
	some c in g.criteria
	some i in host_blocked(r)
	msg := sprintf("probe %s reported escaped but %s/%s shows blocked: %s", [r.probe, i.source, i.kind, i.summary])
}

# --- pass and info -------------------------------------------------------------

confirmations(g) := sort({sprintf("%s/%s", [i.source, i.kind]) |
	some i in evidence(g.result)
	i.source != "probe"
	i.indicates == g.effective
})

confirmation(g) := sprintf(" (confirmed by %s)", [concat(", ", confirmations(g))]) if {
	count(confirmations(g)) > 0
} else := ""

pass_result contains finding(c, g.result.probe, msg) if {
	some g in counted
	g.effective == g.expected
	not unsettled_absence(g) # teardown.rego: absence is not evidence
	not unsettled_path(g) # netpath.rego: blocked against an open path
	not unsettled_exposure(g) # exposure.rego: blocked beside a planted file in the box
	not unsettled_broker(g) # broker.rego: blocked with no broker record refusing it
	not unsettled_no_path(g) # netpath.rego: blocked where the host has no path fact
	some c in g.criteria
	msg := sprintf("probe %s %s as expected%s", [g.result.probe, g.effective, confirmation(g)])
}

info_not_applicable contains finding(c, g.result.probe, msg) if {
	some g in graded
	g.effective == "not-applicable"
	some c in g.criteria
	msg := sprintf("probe %s not applicable: %s", [g.result.probe, detail(g.result)])
}
