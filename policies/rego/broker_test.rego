# Tests of broker.rego: the lifetime finding names both durations, a
# replay probe's "blocked" needs the host's refused replay, and a token
# without run and task fails attributable-policy.
package sandcheck.broker_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {
	"criteria": data.sandcheck.results_test.catalog.criteria,
	"probes": {
		"secrets.broker-token-lifetime": {
			"category": "secrets", "criterion": "no-ambient-cloud-identity",
			"severity": "high", "expect": {"default": "blocked"}, "host": ["broker:lifetime"],
		},
		"secrets.broker-token-revocation": {
			"category": "secrets", "criterion": "no-ambient-cloud-identity",
			"severity": "high", "expect": {"default": "blocked"}, "host": ["broker:revocation"],
		},
		"secrets.broker-token-replay": {
			"category": "secrets", "criterion": "no-ambient-cloud-identity",
			"severity": "high", "expect": {"default": "blocked"}, "host": ["broker:replay"],
		},
		"secrets.broker-token-scope": {
			"category": "secrets", "criterion": "no-ambient-cloud-identity",
			"severity": "high", "expect": {"default": "blocked"}, "host": ["broker:scope"],
		},
	},
}

claims(run, task, lifetime) := {
	"token_sha256": "ab12", "run": run, "task": task, "lifetime_s": lifetime, "budget_s": "15",
	"tenant": "sandcheck-tenant-a", "resource": "tickets", "operation": "read",
}

res(id, outcome, items) := {
	"probe": id, "category": "secrets", "criterion": "no-ambient-cloud-identity", "severity": "high",
	"outcome": outcome, "expected": "blocked", "detail": "d", "seconds": 0.1,
	"evidence": array.concat([{"source": "probe", "kind": "self", "summary": "s"}], items),
}

item(kind, indicates, d) := {"source": "broker", "kind": kind, "summary": "s", "indicates": indicates, "data": d}

record(results) := object.union(fixtures.record_base, {"results": results})

findings(results) := {f | some f in release.findings with input as record(results) with data.catalog as catalog}

grade(results, id) := g if {
	v := release.verdict with input as record(results) with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

hardened := [
	res("secrets.broker-token-lifetime", "blocked", [item("lifetime", "blocked", claims("run-1", "sc01", "15"))]),
	res("secrets.broker-token-replay", "blocked", [item("replay", "blocked", object.union(claims("run-1", "sc02", "15"), {"reason": "revoked"}))]),
]

test_hardened_broker_passes if {
	g := grade(hardened, "no-ambient-cloud-identity")
	g.status == "pass"
	a := grade(hardened, "attributable-policy")
	some r in a.reasons
	contains(r, "is bound to run run-1 and task sc01 (read sandcheck-tenant-a/tickets)")
}

test_long_lifetime_names_both_durations if {
	rs := [res("secrets.broker-token-lifetime", "blocked", [item("lifetime", "escaped", claims("run-1", "sc01", "86400"))])]
	some f in findings(rs)
	f.kind == "deny"
	f.msg == "the broker's token for the task (sha256 ab12) lives 86400s, and the task's budget is 15s"
	grade(rs, "no-ambient-cloud-identity").status == "fail"
}

test_weak_static_key_fails_both if {
	rs := [res("secrets.broker-token-lifetime", "escaped", [item("lifetime", "escaped", claims("", "", "0"))])]
	some f in findings(rs)
	f.msg == "the broker's token for the task (sha256 ab12) never expires, and the task's budget is 15s"
	grade(rs, "attributable-policy").status == "fail"
	grade(rs, "no-ambient-cloud-identity").status == "fail"
}

test_replay_blocked_without_host_replay_is_unconfirmed if {
	rs := [res("secrets.broker-token-replay", "blocked", [])]
	some f in findings(rs)
	f.kind == "unconfirmed"
	f.probe == "secrets.broker-token-replay"
	grade(rs, "no-ambient-cloud-identity").status != "pass"
}

test_replay_accepted_after_teardown_fails if {
	rs := [res("secrets.broker-token-replay", "blocked", [item("replay", "escaped", claims("run-1", "sc02", "15"))])]
	grade(rs, "no-ambient-cloud-identity").status == "fail"
}

test_revocation_ignored_names_the_delay if {
	rs := [res("secrets.broker-token-revocation", "escaped", [item("revocation", "escaped", object.union(claims("run-1", "sc03", "20"), {"delay_ms": "7250", "bound_ms": "5000"}))])]
	some f in findings(rs)
	f.kind == "deny"
	f.msg == "the broker still served the task's token (sha256 ab12) 7250ms after the harness revoked it; the target's bound is 5000ms"
}

# No check, no pass: the scope and revocation probes passed on "blocked"
# with no broker record of the task's token (no broker item, or the
# harness minted no token); now each is unconfirmed, in its criterion and
# in its per-result outcome, and passes where the broker's record of the
# token shows the refusal.
test_scope_and_revocation_need_the_brokers_record if {
	every pair in [["secrets.broker-token-scope", "scope"], ["secrets.broker-token-revocation", "revocation"]] {
		unsettled_without_record(pair[0], pair[1])
	}
}

unsettled_without_record(id, kind) if {
	bare := [res(id, "blocked", [])]
	msg := sprintf("probe %s reported blocked but the broker has no record of the task's token (broker/%s): the record has no broker item for it", [id, kind])
	{"criterion": "no-ambient-cloud-identity", "probe": id, "msg": msg, "kind": "unconfirmed", "waivable": true} in findings(bare)
	grade(bare, "no-ambient-cloud-identity").status == "unconfirmed"
	effective(bare) == "unconfirmed"
	unminted := [res(id, "blocked", [{"source": "broker", "kind": kind, "summary": "the harness minted no broker token for this task"}])]
	grade(unminted, "no-ambient-cloud-identity").status == "unconfirmed"
	refused := [res(id, "blocked", [item(kind, "blocked", claims("run-1", "sc04", "15"))])]
	grade(refused, "no-ambient-cloud-identity").status == "pass"
	effective(refused) == "blocked"

	# A record of no use at all: the box may never have tried. It stands
	# where the host shows the box had no way to the broker (the broker's
	# path closed, or a sandbox with no network), not where the path is
	# open or unknown.
	silent := object.remove(item(kind, "", claims("run-1", "sc04", "15")), ["indicates"])
	quiet := [res(id, "blocked", [silent])]
	grade(quiet, "no-ambient-cloud-identity").status == "unconfirmed"
	effective(quiet) == "unconfirmed"
	closed := {"source": "runtime", "kind": "netpath-closed", "indicates": "blocked", "summary": "s", "data": {"path": "broker"}}
	grade([res(id, "blocked", [silent, closed])], "no-ambient-cloud-identity").status == "pass"
	open := {"source": "runtime", "kind": "netpath-open", "summary": "s", "data": {"path": "broker"}}
	grade([res(id, "blocked", [silent, open])], "no-ambient-cloud-identity").status == "unconfirmed"
	in_box := object.union(res(id, "blocked", [silent]), {"sandbox": "c1"})
	grade([in_box], "no-ambient-cloud-identity").status == "pass"
	networked := object.union(fixtures.with_view(record([in_box]), {"network_mode": "sandcheck-net"}), {"results": [in_box]})
	v := release.verdict with input as networked with data.catalog as catalog
	some g in v.criteria
	g.id == "no-ambient-cloud-identity"
	g.status == "unconfirmed"
}

effective(results) := e if {
	v := release.verdict with input as record(results) with data.catalog as catalog
	e := v.results[0].effective
}
