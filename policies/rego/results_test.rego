# Tests of the release criteria, one or more per rule. They use a small
# catalog of their own (with data.catalog as catalog) so they do not move
# when the real catalog grows. Run with `go test ./policies/` or
# `opa test policies/`.
package sandcheck.results_test

import rego.v1

import data.sandcheck.criteria
import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {
	"criteria": [
		"no-ambient-cloud-identity", "no-host-mount", "bounded-resources", "default-deny-egress",
		"immutable-approved-base", "isolated-scratch", "controlled-output", "attributable-policy",
		"verified-teardown", "hardened-runtime", "usability",
	],
	"probes": {
		"metadata.aws-imdsv1": {
			"category": "metadata", "criterion": "no-ambient-cloud-identity",
			"severity": "critical", "expect": {"default": "blocked"},
		},
		"privilege.seccomp": {
			"category": "privilege", "criterion": "hardened-runtime",
			"severity": "high", "expect": {"default": "blocked"},
		},
		"syscalls.bpf": {
			"category": "syscalls", "criterion": "hardened-runtime",
			"severity": "high", "expect": {"default": "blocked", "package-build": "escaped"},
		},
		"workload.compile": {
			"category": "workload", "criterion": "usability",
			"severity": "info", "expect": {"default": "escaped"},
		},
	},
}

res(id, outcome) := {
	"probe": id,
	"category": catalog.probes[id].category,
	"criterion": catalog.probes[id].criterion,
	"severity": catalog.probes[id].severity,
	"outcome": outcome,
	"expected": catalog.probes[id].expect["default"],
	"detail": "d",
	"evidence": [{"source": "probe", "kind": "errno", "summary": "EPERM"}],
	"seconds": 0.1,
}

item(source, kind, indicates) := {"source": source, "kind": kind, "summary": "s", "indicates": indicates}

with_items(r, items) := object.union(r, {"evidence": array.concat(r.evidence, items)})

with_field(r, k, v) := object.union(r, {k: v})

record(results) := object.union(fixtures.record_base, {"target": object.union(fixtures.record_base.target, {"profile": "high-risk-code"}), "results": results})

hardened := [
	with_items(res("metadata.aws-imdsv1", "blocked"), [item("canary", "metadata", "blocked")]),
	res("privilege.seccomp", "blocked"),
	res("syscalls.bpf", "blocked"),
	res("workload.compile", "escaped"),
]

verdict(results) := x if {
	x := release.verdict with input as record(results) with data.catalog as catalog
}

denies(results) := x if {
	fs := release.findings with input as record(results) with data.catalog as catalog
	x := {strip(f) | some f in fs; f.kind == "deny"}
}

warns(results) := x if {
	fs := release.findings with input as record(results) with data.catalog as catalog
	x := {strip(f) | some f in fs; f.kind == "unconfirmed"}
}

strip(f) := {"criterion": f.criterion, "probe": f.probe, "msg": f.msg}

grade_of(v, id) := g if {
	some g in v.criteria
	g.id == id
}

status_of(results, id) := grade_of(verdict(results), id).status

replace(results, i, r) := array.concat(array.concat(array.slice(results, 0, i), [r]), array.slice(results, i + 1, count(results)))

# --- effective, expected, criteria_of -------------------------------------------

test_effective_is_self_report_without_host_escape if {
	criteria.effective(res("syscalls.bpf", "inconclusive")) == "inconclusive"
	criteria.effective(with_items(res("syscalls.bpf", "blocked"), [item("runtime", "seccomp", "blocked")])) == "blocked"
}

test_effective_host_escape_outranks_self_report if {
	criteria.effective(with_items(res("syscalls.bpf", "blocked"), [item("tracer", "bpf", "escaped")])) == "escaped"
	criteria.effective(with_items(res("syscalls.bpf", "not-applicable"), [item("tracer", "bpf", "escaped")])) == "escaped"
}

test_effective_ignores_probe_sourced_items if {
	criteria.effective(with_items(res("syscalls.bpf", "blocked"), [item("probe", "claim", "escaped")])) == "blocked"
}

test_effective_tolerates_null_evidence if {
	criteria.effective(with_field(res("syscalls.bpf", "blocked"), "evidence", null)) == "blocked"
}

test_expected_follows_profile if {
	r := with_field(res("syscalls.bpf", "blocked"), "expected", "blocked")
	criteria.expected(r) == "escaped" with input as {"target": {"profile": "package-build"}} with data.catalog as catalog
	criteria.expected(r) == "blocked" with input as {"target": {"profile": "high-risk-code"}} with data.catalog as catalog
}

test_expected_ignores_record_for_known_probe if {
	r := with_field(res("syscalls.bpf", "escaped"), "expected", "escaped")
	criteria.expected(r) == "blocked" with input as record([]) with data.catalog as catalog
}

test_criteria_of_known_probe if {
	criteria.criteria_of(res("syscalls.bpf", "blocked")) == {"hardened-runtime"} with data.catalog as catalog
}

test_criteria_of_moved_result_counts_twice if {
	r := with_field(res("syscalls.bpf", "escaped"), "criterion", "usability")
	criteria.criteria_of(r) == {"hardened-runtime", "usability"} with data.catalog as catalog
}

test_criteria_of_unknown_probe_and_criterion_is_integrity if {
	r := {"probe": "x.y", "criterion": "made-up"}
	criteria.criteria_of(r) == {"record-integrity"} with data.catalog as catalog
}

# --- deny rules -------------------------------------------------------------------

test_hardened_has_no_findings if {
	count(denies(hardened)) == 0
	count(warns(hardened)) == 0
}

test_deny_escaped_self_reported if {
	rs := replace(hardened, 2, res("syscalls.bpf", "escaped"))
	f := {"criterion": "hardened-runtime", "probe": "syscalls.bpf", "msg": "probe syscalls.bpf escaped (expected blocked): self-reported: d"}
	f in criteria.deny_escaped with input as record(rs) with data.catalog as catalog
	count(denies(rs)) == 1
}

test_deny_escaped_cites_host_evidence if {
	r := with_items(res("syscalls.bpf", "inconclusive"), [item("tracer", "bpf", "escaped")])
	rs := replace(hardened, 2, r)
	msg := "probe syscalls.bpf escaped (expected blocked): tracer/bpf shows escaped: s"
	{"criterion": "hardened-runtime", "probe": "syscalls.bpf", "msg": msg} in denies(rs)
	count(warns(rs)) == 0
}

test_deny_contradiction if {
	r := with_items(res("metadata.aws-imdsv1", "blocked"), [item("canary", "metadata", "escaped")])
	rs := replace(hardened, 0, r)
	msg := "probe metadata.aws-imdsv1 reported blocked but canary/metadata shows escaped: s"
	f := {"criterion": "no-ambient-cloud-identity", "probe": "metadata.aws-imdsv1", "msg": msg}
	object.union(f, {"waivable": false}) in criteria.deny_contradiction with input as record(rs) with data.catalog as catalog

	# the contradiction says it all; no second finding for the same escape
	denies(rs) == {f}
}

test_deny_contradiction_even_when_escape_expected if {
	r := with_items(res("workload.compile", "blocked"), [item("runtime", "exit", "escaped")])
	rs := replace(hardened, 3, r)
	count(criteria.deny_contradiction) == 1 with input as record(rs) with data.catalog as catalog
}

test_deny_blocked_workload if {
	rs := replace(hardened, 3, res("workload.compile", "blocked"))
	msg := "probe workload.compile was blocked but must succeed (expected escaped): self-reported: d"
	denies(rs) == {{"criterion": "usability", "probe": "workload.compile", "msg": msg}}
}

test_deny_unknown_probe if {
	r := with_field(res("syscalls.bpf", "blocked"), "probe", "syscalls.made-up")
	msg := "probe syscalls.made-up is not in the catalog (the record may be forged)"
	f := {"criterion": "hardened-runtime", "probe": "syscalls.made-up", "msg": msg}
	object.union(f, {"waivable": false}) in criteria.deny_unknown_probe with input as record(array.concat(hardened, [r])) with data.catalog as catalog
}

test_deny_unknown_probe_and_criterion_goes_to_integrity if {
	r := {"probe": "x.y", "category": "x", "criterion": "made-up", "outcome": "escaped", "expected": "blocked", "evidence": []}
	v := verdict(array.concat(hardened, [r]))
	grade_of(v, "record-integrity").status == "fail"
	not v.pass
}

test_deny_mismatch_category if {
	rs := replace(hardened, 1, with_field(res("privilege.seccomp", "blocked"), "category", "workload"))
	msg := `probe privilege.seccomp claims category "workload" but the catalog says "privilege" (the record may be forged)`
	denies(rs) == {{"criterion": "hardened-runtime", "probe": "privilege.seccomp", "msg": msg}}
}

test_deny_mismatch_criterion_fails_both if {
	rs := replace(hardened, 1, with_field(res("privilege.seccomp", "blocked"), "criterion", "usability"))
	status_of(rs, "hardened-runtime") == "fail"
	status_of(rs, "usability") == "fail"
}

test_deny_mismatch_expected if {
	r := with_field(res("privilege.seccomp", "escaped"), "expected", "escaped")
	rs := replace(hardened, 1, r)
	msg := `probe privilege.seccomp claims expected "escaped" but the catalog expects "blocked" for profile "high-risk-code" (the record may be forged)`
	{"criterion": "hardened-runtime", "probe": "privilege.seccomp", "msg": msg} in denies(rs)
	some f in criteria.deny_escaped with input as record(rs) with data.catalog as catalog
	f.probe == "privilege.seccomp"
}

test_deny_invalid_outcome if {
	rs := replace(hardened, 1, res("privilege.seccomp", "fine"))
	msg := `probe privilege.seccomp reported unknown outcome "fine"`
	denies(rs) == {{"criterion": "hardened-runtime", "probe": "privilege.seccomp", "msg": msg}}
}

# --- warn rules -------------------------------------------------------------------

test_warn_inconclusive if {
	rs := replace(hardened, 2, res("syscalls.bpf", "inconclusive"))
	msg := "probe syscalls.bpf was inconclusive: d"
	warns(rs) == {{"criterion": "hardened-runtime", "probe": "syscalls.bpf", "msg": msg}}
	count(denies(rs)) == 0
}

test_warn_disputed if {
	r := with_items(res("workload.compile", "escaped"), [item("runtime", "exit", "blocked")])
	rs := replace(hardened, 3, r)
	msg := "probe workload.compile reported escaped but runtime/exit shows blocked: s"
	warns(rs) == {{"criterion": "usability", "probe": "workload.compile", "msg": msg}}
}

test_no_dispute_when_host_confirms_escape if {
	r := with_items(res("workload.compile", "escaped"), [item("runtime", "exit", "blocked"), item("canary", "dns", "escaped")])
	count(warns(replace(hardened, 3, r))) == 0
}

# --- criteria and verdict -----------------------------------------------------------

test_hardened_passes if {
	v := verdict(hardened)
	v.pass
	every g in v.criteria {
		g.status == "pass"
	}
}

test_criteria_in_catalog_order if {
	[g.id | some g in verdict([]).criteria] == catalog.criteria
}

test_no_results_is_not_tested_and_does_not_pass if {
	v := release.verdict with input as object.union(record([]), {"sandboxes": []}) with data.catalog as catalog
	not v.pass
	grade_of(v, "no-host-mount") == {"id": "no-host-mount", "status": "not-tested", "reasons": ["no probe results"]}
}

test_no_results_with_views_does_not_pass if {
	v := verdict([])
	not v.pass
	grade_of(v, "no-host-mount").status == "pass"
}

test_null_results_is_not_tested if {
	v := release.verdict with input as {"target": {}, "results": null} with data.catalog as catalog
	grade_of(v, "usability").status == "not-tested"
}

# A probe's own not-applicable where the catalog expects blocked is never
# held: the box writes the probe's output (issue 28: "io_uring is not built
# into this kernel" passed a target whose seccomp let io_uring through).
test_self_reported_not_applicable_is_unconfirmed if {
	rs := replace(hardened, 2, res("syscalls.bpf", "not-applicable"))
	v := verdict(rs)
	g := grade_of(v, "hardened-runtime")
	g.status == "unconfirmed"
	not v.pass
	some m in g.reasons
	startswith(m, "probe syscalls.bpf reported not-applicable but profile")
}

# A host fact saying not-applicable (the kernel's syscall table lacks the
# syscall) confirms it; the result is then ignored.
host_na(r) := object.union(r, {"evidence": array.concat(r.evidence, [{"source": "kernel", "kind": "kernel-syscall-table", "summary": "no bpf", "indicates": "not-applicable"}])})

test_host_confirmed_not_applicable_is_ignored if {
	rs := replace(hardened, 2, host_na(res("syscalls.bpf", "not-applicable")))
	g := grade_of(verdict(rs), "hardened-runtime")
	g.status == "pass"
	"probe syscalls.bpf not applicable: d" in g.reasons
}

# The probe's own evidence saying not-applicable confirms nothing.
test_probe_items_do_not_confirm_not_applicable if {
	r := res("syscalls.bpf", "not-applicable")
	forged := object.union(r, {"evidence": [{"source": "probe", "kind": "x", "summary": "s", "indicates": "not-applicable"}]})
	grade_of(verdict(replace(hardened, 2, forged)), "hardened-runtime").status == "unconfirmed"
}

test_only_not_applicable_rests_on_the_view if {
	rs := replace(hardened, 0, host_na(res("metadata.aws-imdsv1", "not-applicable")))
	g := grade_of(verdict(rs), "no-ambient-cloud-identity")
	g == {"id": "no-ambient-cloud-identity", "status": "pass", "reasons": [
		"sandbox shared has no credential-shaped environment variables (runtime view)",
		"probe metadata.aws-imdsv1 not applicable: d",
	]}
}

test_pass_reasons_cite_confirmation if {
	g := grade_of(verdict(hardened), "no-ambient-cloud-identity")
	"probe metadata.aws-imdsv1 blocked as expected (confirmed by canary/metadata)" in g.reasons
}

test_unconfirmed_never_passes if {
	v := verdict(replace(hardened, 2, res("syscalls.bpf", "inconclusive")))
	grade_of(v, "hardened-runtime").status == "unconfirmed"
	not v.pass
}

# A probe the runner could not carry out is never a pass, even with every
# other probe of its criterion blocked as expected.
test_not_tested_never_passes if {
	r := with_field(res("syscalls.bpf", "not-tested"), "detail", "runner process lacks host-pid")
	v := verdict(replace(hardened, 2, r))
	g := grade_of(v, "hardened-runtime")
	g.status == "unconfirmed"
	"probe syscalls.bpf was not tested: runner process lacks host-pid" in g.reasons
	not v.pass
}

test_fail_outranks_unconfirmed if {
	rs := replace(replace(hardened, 2, res("syscalls.bpf", "inconclusive")), 1, res("privilege.seccomp", "escaped"))
	g := grade_of(verdict(rs), "hardened-runtime")
	g.status == "fail"
	g.reasons == [
		"probe privilege.seccomp escaped (expected blocked): self-reported: d",
		"probe syscalls.bpf was inconclusive: d",
	]
}

test_one_failure_fails_only_its_criterion if {
	v := verdict(replace(hardened, 2, res("syscalls.bpf", "escaped")))
	not v.pass
	{g.id | some g in v.criteria; g.status != "pass"} == {"hardened-runtime"}
}

test_integrity_listed_only_when_needed if {
	every g in verdict(hardened).criteria {
		g.id != "record-integrity"
	}
}

test_oom_kill_settles_an_inconclusive_probe if {
	r := {
		"probe": "host.a", "category": "host", "criterion": "no-host-mount", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "oom-killed", "indicates": "blocked", "summary": "oom"}],
	}
	criteria.effective(r) == "blocked"
}

test_cpu_budget_kill_settles_an_inconclusive_probe if {
	r := {
		"probe": "resources.a", "category": "resources", "criterion": "bounded-resources", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "cpu-budget-killed", "indicates": "blocked", "summary": "killed at the budget"}],
	}
	criteria.effective(r) == "blocked"
}

test_host_check_settles_an_inconclusive_probe if {
	r := {
		"probe": "privilege.a", "category": "privilege", "criterion": "hardened-runtime", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "host-check", "indicates": "blocked", "summary": "published on named addresses only"}],
	}
	criteria.effective(r) == "blocked"
}

test_host_check_escape_outranks_the_probe if {
	r := {
		"probe": "privilege.a", "category": "privilege", "criterion": "hardened-runtime", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "host-check", "indicates": "escaped", "summary": "published on all addresses"}],
	}
	criteria.effective(r) == "escaped"
}

test_failed_host_check_settles_nothing if {
	r := {
		"probe": "privilege.a", "category": "privilege", "criterion": "hardened-runtime", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "host-check-failed", "summary": "no container on this engine"}],
	}
	criteria.effective(r) == "inconclusive"
}

test_other_host_blocked_does_not_settle_inconclusive if {
	r := {
		"probe": "host.a", "category": "host", "criterion": "no-host-mount", "outcome": "inconclusive", "expected": "blocked",
		"evidence": [{"source": "runtime", "kind": "seccomp", "indicates": "blocked", "summary": "s"}],
	}
	criteria.effective(r) == "inconclusive"
}
