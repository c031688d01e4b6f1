# Tests of "absence is not evidence" (teardown.rego): a teardown or
# persistence probe's "blocked" counts only where the host confirms it with
# its precondition met. They use a small catalog of their own.
package sandcheck.absence_test

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
		"teardown.container": {
			"category": "teardown", "criterion": "verified-teardown", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["teardown:container"],
		},
		"teardown.process": {
			"category": "teardown", "criterion": "verified-teardown", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["teardown:processes", "teardown:cgroups"],
		},
		"persistence.rootfs-write": {
			"category": "persistence", "criterion": "immutable-approved-base", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["runtime:read-only-rootfs"],
		},
		"persistence.inputs-writable": {
			"category": "persistence", "criterion": "immutable-approved-base", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["inputs:intact"],
		},
		"persistence.marker-next-run": {
			"category": "persistence", "criterion": "immutable-approved-base", "severity": "high",
			"expect": {"default": "blocked"},
		},
		"persistence.background-process": {
			"category": "persistence", "criterion": "isolated-scratch", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["runtime:carryover-processes"],
		},
		"resources.setsid-daemon": {
			"category": "resources", "criterion": "bounded-resources", "severity": "medium",
			"expect": {"default": "blocked"}, "host": ["runtime:carryover-processes"],
		},
		"persistence.scratch-unlimited": {
			"category": "persistence", "criterion": "isolated-scratch", "severity": "medium",
			"expect": {"default": "blocked"}, "host": ["runtime:scratch-limits"],
		},
		"privilege.seccomp": {
			"category": "privilege", "criterion": "hardened-runtime", "severity": "high",
			"expect": {"default": "blocked"},
		},
	},
}

res(id, outcome, items) := {
	"probe": id,
	"category": catalog.probes[id].category,
	"criterion": catalog.probes[id].criterion,
	"severity": catalog.probes[id].severity,
	"outcome": outcome,
	"expected": "blocked",
	"detail": "nothing to see",
	"evidence": items,
	"seconds": 0.1,
}

# td is a teardown item as the engine writes it: precondition "" leaves the
# data field out (a record from before the rule).
td(kind, indicates, precondition) := x if {
	precondition != ""
	x := {"source": "teardown", "kind": concat("", ["teardown.", kind]), "summary": "nothing left", "indicates": indicates, "data": {"token": "sc1", "precondition": precondition}}
} else := {"source": "teardown", "kind": concat("", ["teardown.", kind]), "summary": "nothing left", "indicates": indicates}

item(source, kind, indicates) := {"source": source, "kind": kind, "summary": "s", "indicates": indicates}

record(results, inputs_ro) := object.union(fixtures.record_base, {
	"target": object.union(fixtures.record_base.target, {"inputs": {"path": "/inputs", "source": "/run/in", "read_only": inputs_ro}}),
	"results": results,
})

findings(results, inputs_ro) := {f |
	some x in release.findings with input as record(results, inputs_ro) with data.catalog as catalog
	f := {"kind": x.kind, "probe": x.probe, "msg": x.msg}
}

kinds_for(results, inputs_ro, probe) := {f.kind | some f in findings(results, inputs_ro); f.probe == probe}

status(results, inputs_ro, id) := g.status if {
	v := release.verdict with input as record(results, inputs_ro) with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

# --- teardown ----------------------------------------------------------------

test_teardown_absence_without_marker_is_unconfirmed if {
	r := res("teardown.container", "blocked", [td("container", "", "none")])
	kinds_for([r], true, "teardown.container") == {"unconfirmed"}
	status([r], true, "verified-teardown") == "unconfirmed"
	some f in findings([r], true)
	f.kind == "unconfirmed"
	contains(f.msg, "has no marker that a container plant was impossible or seen")
}

# A record written before the rule: its absence items indicate blocked with
# no precondition, and no longer pass.
test_teardown_old_absence_item_is_unconfirmed if {
	r := res("teardown.container", "blocked", [td("container", "blocked", "")])
	kinds_for([r], true, "teardown.container") == {"unconfirmed"}
}

test_teardown_no_avenue_passes if {
	r := res("teardown.container", "blocked", [td("container", "blocked", "no-avenue")])
	kinds_for([r], true, "teardown.container") == {"pass"}
	status([r], true, "verified-teardown") == "pass"
}

# Only the preconditions the policy knows settle an absence.
test_teardown_unknown_precondition_is_unconfirmed if {
	r := res("teardown.container", "blocked", [td("container", "blocked", "trust-me")])
	kinds_for([r], true, "teardown.container") == {"unconfirmed"}
}

# Every kind a probe names needs its own marker.
test_teardown_every_kind_needs_its_marker if {
	r := res("teardown.process", "blocked", [td("processes", "blocked", "no-avenue"), td("cgroups", "", "none")])
	kinds_for([r], true, "teardown.process") == {"unconfirmed"}
	some f in findings([r], true)
	contains(f.msg, "a cgroups plant")
	ok := res("teardown.process", "blocked", [td("processes", "blocked", "no-avenue"), td("cgroups", "blocked", "no-avenue")])
	kinds_for([ok], true, "teardown.process") == {"pass"}
}

# No teardown item at all (the check never ran) is no marker either.
test_teardown_missing_item_is_unconfirmed if {
	r := res("teardown.container", "blocked", [])
	some f in findings([r], true)
	f.kind == "unconfirmed"
	contains(f.msg, "the host made no container check")
}

# What survived still fails, whatever the precondition.
test_teardown_leftover_still_escapes if {
	r := res("teardown.container", "blocked", [td("container", "escaped", "")])
	"deny" in kinds_for([r], true, "teardown.container")
	not "pass" in kinds_for([r], true, "teardown.container")
}

# --- persistence ----------------------------------------------------------------

test_persistence_writable_rootfs_blocked_is_unconfirmed if {
	r := res("persistence.rootfs-write", "blocked", [item("runtime", "read-only-rootfs", "")])
	kinds_for([r], true, "persistence.rootfs-write") == {"unconfirmed"}
	r2 := res("persistence.rootfs-write", "blocked", [item("runtime", "read-only-rootfs", "blocked")])
	kinds_for([r2], true, "persistence.rootfs-write") == {"pass"}
}

# Intact inputs after the run prove the write was refused only where the
# host bound them read-only.
test_persistence_inputs_intact_counts_only_read_only if {
	r := res("persistence.inputs-writable", "blocked", [item("inputs", "inputs:intact", "blocked")])
	kinds_for([r], false, "persistence.inputs-writable") == {"unconfirmed"}
	kinds_for([r], true, "persistence.inputs-writable") == {"pass"}
}

# A persistence probe the catalog gives no host evidence has nothing to
# confirm its "blocked": the host has no view of it.
test_persistence_without_host_evidence_is_unconfirmed if {
	r := res("persistence.marker-next-run", "blocked", [])
	kinds_for([r], true, "persistence.marker-next-run") == {"unconfirmed"}
	some f in findings([r], true)
	contains(f.msg, "the host has no view of it")
}

# --- carry-over between tasks --------------------------------------------------

# carry is a carryover item as the engine writes it.
carry(kind, indicates, precondition) := {
	"source": "runtime", "kind": concat("", ["carryover-", kind]), "summary": "the check task ran in a fresh sandbox",
	"indicates": indicates, "data": {"precondition": precondition},
}

test_carryover_no_avenue_passes if {
	r := res("persistence.background-process", "blocked", [carry("processes", "blocked", "no-avenue")])
	kinds_for([r], true, "persistence.background-process") == {"pass"}
}

# The check ran in the plant's own box, or the box had an avenue: the
# probe's "not found" is its word only.
test_carryover_same_box_is_unconfirmed if {
	r := res("persistence.background-process", "blocked", [carry("processes", "", "none")])
	kinds_for([r], true, "persistence.background-process") == {"unconfirmed"}
	some f in findings([r], true)
	contains(f.msg, "reported blocked but no host fact confirms")
}

# A carryover item that indicates blocked without the precondition (a
# forged or older record) settles nothing.
test_carryover_blocked_without_precondition_is_unconfirmed if {
	r := res("persistence.background-process", "blocked", [carry("processes", "blocked", "none")])
	kinds_for([r], true, "persistence.background-process") == {"unconfirmed"}
	r2 := res("persistence.background-process", "blocked", [carry("processes", "blocked", "trust-me")])
	kinds_for([r2], true, "persistence.background-process") == {"unconfirmed"}
}

# A carry-over probe of another family (resources) is an absence probe too.
test_carryover_other_family_is_absence_probe if {
	r := res("resources.setsid-daemon", "blocked", [carry("processes", "", "none")])
	criteria.absence_probe(r) with data.catalog as catalog
	kinds_for([r], true, "resources.setsid-daemon") == {"unconfirmed"}
	ok := res("resources.setsid-daemon", "blocked", [carry("processes", "blocked", "no-avenue")])
	kinds_for([ok], true, "resources.setsid-daemon") == {"pass"}
}

# A process the host saw meet the next task still fails.
test_carryover_escape_still_fails if {
	r := res("persistence.background-process", "escaped", [carry("processes", "", "none")])
	"deny" in kinds_for([r], true, "persistence.background-process")
}

# Scratch limits: only the host's own declaration confirms.
test_scratch_limits_need_the_host_declaration if {
	r := res("persistence.scratch-unlimited", "blocked", [item("runtime", "scratch-limits", "")])
	kinds_for([r], true, "persistence.scratch-unlimited") == {"unconfirmed"}
	ok := res("persistence.scratch-unlimited", "blocked", [item("runtime", "scratch-limits", "blocked")])
	kinds_for([ok], true, "persistence.scratch-unlimited") == {"pass"}
}

# --- the seen-plant marker -----------------------------------------------------

# A box with an avenue whose plant the host saw before close, and found
# gone after, passes.
test_teardown_seen_plant_passes if {
	r := res("teardown.container", "blocked", [td("container", "blocked", "seen")])
	kinds_for([r], true, "teardown.container") == {"pass"}
	status([r], true, "verified-teardown") == "pass"
}

# Other families are not touched.
test_other_family_unchanged if {
	r := res("privilege.seccomp", "blocked", [])
	kinds_for([r], true, "privilege.seccomp") == {"pass"}
	not criteria.absence_probe(r) with data.catalog as catalog
}
