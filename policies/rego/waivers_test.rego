# Waivers: an active waiver turns a failed criterion into "waived" and is
# listed; an expired one waives nothing and says so; integrity findings are
# never waived; a waiver for another target does not apply.
package sandcheck.waivers_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := data.sandcheck.results_test.catalog

soft := fixtures.with_view(fixtures.record_base, {"cap_add": ["NET_RAW"]})

waiver(overrides) := object.union(
	{
		"id": "w.yaml:3", "criterion": "hardened-runtime", "probe": "", "target": "hardened",
		"owner": "sec@example.com", "reason": "pilot", "expires": "2030-06-30",
		"expires_at": "2030-07-01T00:00:00Z",
	},
	overrides,
)

# 2030-06-20 and 2030-08-01, in ns since the epoch.
june := 1908144000000000000

august := 1911772800000000000

verdict(rec, ws, now) := v if {
	v := release.verdict with input as rec with data.catalog as catalog with data.grading.waivers as ws with time.now_ns as now
}

grade(v, id) := g if {
	some g in v.criteria
	g.id == id
}

test_active_waiver_waives if {
	v := verdict(soft, [waiver({})], june)
	g := grade(v, "hardened-runtime")
	g.status == "waived"
	g.reasons[0] == "sandbox shared: capabilities added: NET_RAW (runtime view) [waived by w.yaml:3: owner sec@example.com, expires 2030-06-30: pilot]"
	count(v.waivers) == 1
	v.waivers[0].waived == ["sandbox shared: capabilities added: NET_RAW (runtime view)"]
	"waiver w.yaml:3 (owner sec@example.com) expires on 2030-06-30" in v.warnings
}

test_expired_waiver_stops_waiving if {
	v := verdict(soft, [waiver({})], august)
	g := grade(v, "hardened-runtime")
	g.status == "fail"
	"waiver w.yaml:3 (owner sec@example.com) expired on 2030-06-30 and no longer applies" in g.reasons
	v.waivers == []
	[w.id | some w in v.expired_waivers] == ["w.yaml:3"]
}

test_waiver_for_other_target_does_not_apply if {
	v := verdict(soft, [waiver({"target": "other"})], june)
	grade(v, "hardened-runtime").status == "fail"
	v.expired_waivers == []
}

test_probe_waiver_matches_glob if {
	r := {
		"probe": "syscalls.bpf", "category": "syscalls", "criterion": "hardened-runtime", "severity": "high",
		"outcome": "escaped", "expected": "blocked", "detail": "d", "evidence": [],
	}
	rec := object.union(fixtures.record_base, {"results": [r]})
	v := verdict(rec, [waiver({"criterion": "", "probe": "syscalls.*"})], june)
	grade(v, "hardened-runtime").status == "waived"
}

test_contradiction_is_never_waived if {
	r := {
		"probe": "syscalls.bpf", "category": "syscalls", "criterion": "hardened-runtime", "severity": "high",
		"outcome": "blocked", "expected": "blocked", "detail": "d",
		"evidence": [{"source": "tracer", "kind": "bpf", "summary": "bpf() returned 0", "indicates": "escaped"}],
	}
	rec := object.union(fixtures.record_base, {"results": [r]})
	v := verdict(rec, [waiver({})], june)
	grade(v, "hardened-runtime").status == "fail"
}

test_unused_waiver_warns if {
	v := verdict(fixtures.record_base, [waiver({})], june)
	"waiver w.yaml:3 (owner sec@example.com) matches no finding of this run" in v.warnings
}

test_waived_run_passes if {
	r := {
		"probe": "syscalls.bpf", "category": "syscalls", "criterion": "hardened-runtime", "severity": "high",
		"outcome": "blocked", "expected": "blocked", "detail": "d", "evidence": [],
	}
	v := verdict(object.union(soft, {"results": [r]}), [waiver({})], june)
	v.pass
}

# --- waivers of a whole criterion ----------------------------------------------

whole_warnings(v) := {m | some m in v.warnings; contains(m, "waives the whole criterion")}

# A criterion waiver (admitted with --allow-criterion-waivers) that applied
# warns, naming the criterion; the warning is in the verdict every report
# and the console read.
test_applied_criterion_waiver_warns if {
	v := verdict(soft, [waiver({})], june)
	grade(v, "hardened-runtime").status == "waived"
	whole_warnings(v) == {"waiver w.yaml:3 (owner sec@example.com) waives the whole criterion hardened-runtime (admitted by --allow-criterion-waivers): its findings do not gate this run"}
}

# A probe glob reaching every probe of a criterion, or probes of more than
# one, is a criterion waiver too.
test_glob_over_a_whole_criterion_warns if {
	r := {
		"probe": "syscalls.bpf", "category": "syscalls", "criterion": "hardened-runtime", "severity": "high",
		"outcome": "escaped", "expected": "blocked", "detail": "d", "evidence": [],
	}
	rec := object.union(fixtures.record_base, {"results": [r]})
	every_probe := verdict(rec, [waiver({"criterion": "", "probe": "{privilege.seccomp,syscalls.bpf}"})], june)
	count(whole_warnings(every_probe)) == 1
	some m in whole_warnings(every_probe)
	contains(m, "whole criterion hardened-runtime")
	across := verdict(rec, [waiver({"criterion": "", "probe": "*.*"})], june)
	some n in whole_warnings(across)
	contains(n, "hardened-runtime")
	contains(n, "no-ambient-cloud-identity")
}

# A waiver of part of a criterion does not warn so; one that applied to
# nothing says only that.
test_narrow_or_unused_waiver_no_whole_warning if {
	r := {
		"probe": "syscalls.bpf", "category": "syscalls", "criterion": "hardened-runtime", "severity": "high",
		"outcome": "escaped", "expected": "blocked", "detail": "d", "evidence": [],
	}
	rec := object.union(fixtures.record_base, {"results": [r]})
	narrow := verdict(rec, [waiver({"criterion": "", "probe": "syscalls.*"})], june)
	grade(narrow, "hardened-runtime").status == "waived"
	whole_warnings(narrow) == set()
	unused := verdict(fixtures.record_base, [waiver({})], june)
	whole_warnings(unused) == set()
}

# Waivers judged together: one waiver per probe of hardened-runtime (each
# a part of it alone) together waive the whole criterion, and the verdict
# warns naming both, as it does for one whole-criterion waiver; the same
# set for another target, or a set missing a probe, does not.
test_waiver_set_over_a_whole_criterion_warns if {
	rec := object.union(fixtures.record_base, {"results": [escaped_result("syscalls.bpf"), escaped_result("privilege.seccomp")]})
	one := waiver({"id": "w.yaml:3", "criterion": "", "probe": "syscalls.bpf"})
	two := waiver({"id": "w.yaml:9", "criterion": "", "probe": "privilege.*"})
	v := verdict(rec, [one, two], june)
	grade(v, "hardened-runtime").status == "waived"
	whole_warnings(v) == {"waiver set w.yaml:3, w.yaml:9 (owners sec@example.com) waives the whole criterion hardened-runtime (admitted by --allow-criterion-waivers): its findings do not gate this run"}
	elsewhere := verdict(rec, [one, object.union(two, {"target": "other"})], june)
	whole_warnings(elsewhere) == set()
	partial := verdict(rec, [one], june)
	whole_warnings(partial) == set()
}

escaped_result(id) := {
	"probe": id, "category": split(id, ".")[0], "criterion": "hardened-runtime", "severity": "high",
	"outcome": "escaped", "expected": "blocked", "detail": "d", "evidence": [],
}
