# The broker's tokens (probes naming broker:* host evidence, engine/broker.go):
# the broker's own record, as the harness gathered it, names a token by its
# SHA-256 and its claims, never the token. The probe results are graded in
# results.rego like any other; these rules add what the record says beyond
# an outcome: how long a token lived against the task's budget
# (no-ambient-cloud-identity), whether the replay after teardown was made
# at all, and whether the token was bound to the run and task that used it
# (attributable-policy).
package sandcheck.criteria

import rego.v1

broker_items(r, kind) := [i |
	some i in evidence(r)
	i.source == "broker"
	i.kind == kind
]

broker_data(i, k) := object.get(object.get(i, "data", {}), k, "")

# lifetime_text reads a token's lifetime in seconds ("0": it never expires).
lifetime_text(s) := "never expires" if {
	s == "0"
} else := sprintf("lives %ss", [s])

# A token living past its task (or forever), naming both durations.
deny_broker_token_lifetime contains finding("no-ambient-cloud-identity", r.probe, msg) if {
	some r in results
	some i in broker_items(r, "lifetime")
	i.indicates == "escaped"
	msg := sprintf("the broker's token for the task (sha256 %s) %s, and the task's budget is %ss", [
		broker_data(i, "token_sha256"), lifetime_text(broker_data(i, "lifetime_s")), broker_data(i, "budget_s"),
	])
}

# The replay probe settles only on the host's replay after teardown: a
# "blocked" without the broker refusing that replay is the box's word alone.
unconfirmed_broker_replay contains finding(c, r.probe, msg) if {
	some g in graded
	g.effective == "blocked"
	r := g.result
	"broker:replay" in object.get(data.catalog.probes[r.probe], "host", [])
	not broker_replay_refused(r)
	some c in g.criteria
	msg := sprintf("probe %s reported blocked but the host made no replay of the task's token after teardown that the broker refused", [r.probe])
}

broker_replay_refused(r) if {
	some i in broker_items(r, "replay")
	i.indicates == "blocked"
}

# The scope, revocation and lifetime probes rest on the broker's own record
# of the task's token as well: a "blocked" with no broker record of that
# token (no broker item of the probe's kind, or one saying the harness
# minted no token for the task) is the box's word alone, never a pass. No
# check, no pass. A record that shows the broker refusing settles it; one
# that shows no use at all (no out-of-scope use, none after the revocation)
# settles it only where the host shows the box had no way to the broker:
# the broker's path from the box's namespace closed (runtime/netpath-closed,
# path broker), or the runtime's view of its sandbox showing no network. A
# box that could reach the broker and says "blocked" without trying leaves
# the same silent record.
broker_record_kinds := {"broker:lifetime": "lifetime", "broker:scope": "scope", "broker:revocation": "revocation"}

# silence_kinds are the records that can show no use at all.
silence_kinds := {"scope", "revocation"}

unsettled_broker(g) if {
	g.effective == "blocked"
	some h in object.get(data.catalog.probes[g.result.probe], "host", [])
	kind := broker_record_kinds[h]
	not broker_record(g.result, kind)
}

unsettled_broker(g) if {
	g.effective == "blocked"
	some h in object.get(data.catalog.probes[g.result.probe], "host", [])
	kind := broker_record_kinds[h]
	kind in silence_kinds
	broker_record(g.result, kind)
	not broker_record_blocked(g.result, kind)
	not broker_unreachable(g.result)
}

# broker_record holds where the broker's record names the task's token.
broker_record(r, kind) if {
	some i in broker_items(r, kind)
	broker_data(i, "token_sha256") != ""
}

broker_record_blocked(r, kind) if {
	some i in broker_items(r, kind)
	i.indicates == "blocked"
}

broker_unreachable(r) if {
	some i in evidence(r)
	i.source == "runtime"
	i.kind == "netpath-closed"
	object.get(i, ["data", "path"], "") == "broker"
}

broker_unreachable(r) if {
	id := object.get(r, "sandbox", "")
	id != ""
	some s in sandboxes
	s.id == id
	v := object.get(s, "runtime_view", null)
	is_object(v)
	known_fact(v, "network_mode")
	v.network_mode == "none"
}

unconfirmed_broker_record contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_broker(g)
	r := g.result
	some h in object.get(data.catalog.probes[r.probe], "host", [])
	kind := broker_record_kinds[h]
	not broker_record(r, kind)
	some c in g.criteria
	msg := sprintf("probe %s reported blocked but the broker has no record of the task's token (broker/%s): %s", [r.probe, kind, broker_record_seen(r, kind)])
}

unconfirmed_broker_record contains finding(c, r.probe, msg) if {
	some g in graded
	unsettled_broker(g)
	r := g.result
	some h in object.get(data.catalog.probes[r.probe], "host", [])
	kind := broker_record_kinds[h]
	broker_record(r, kind)
	some c in g.criteria
	msg := sprintf("probe %s reported blocked but the broker refused no use of the task's token (broker/%s: %s) and nothing on the host shows the box had no way to the broker", [r.probe, kind, broker_record_seen(r, kind)])
}

broker_record_seen(r, kind) := concat("; ", sort({i.summary | some i in broker_items(r, kind)})) if {
	count(broker_items(r, kind)) > 0
} else := "the record has no broker item for it"

# A token that names no run and task cannot tie a broker call to the
# workload that made it (the weak reference's one static key).
deny_broker_token_unbound contains finding("attributable-policy", r.probe, msg) if {
	some r in results
	some i in broker_items(r, "lifetime")
	broker_data(i, "token_sha256") != ""
	not broker_bound(i)
	msg := sprintf("the broker's token for the task (sha256 %s) names no run or task: the broker cannot attribute its calls to the workload", [broker_data(i, "token_sha256")])
}

pass_broker_token_bound contains finding("attributable-policy", r.probe, msg) if {
	some r in results
	some i in broker_items(r, "lifetime")
	broker_bound(i)
	msg := sprintf("the broker's token for the task (sha256 %s) is bound to run %s and task %s (%s %s/%s)", [
		broker_data(i, "token_sha256"), broker_data(i, "run"), broker_data(i, "task"),
		broker_data(i, "operation"), broker_data(i, "tenant"), broker_data(i, "resource"),
	])
}

broker_bound(i) if {
	broker_data(i, "run") != ""
	broker_data(i, "task") != ""
}

# A broker that kept honouring a revoked token past the target's bound,
# with the delay the host measured.
deny_broker_revocation_delay contains finding("no-ambient-cloud-identity", r.probe, msg) if {
	some r in results
	some i in broker_items(r, "revocation")
	i.indicates == "escaped"
	msg := sprintf("the broker still served the task's token (sha256 %s) %sms after the harness revoked it; the target's bound is %sms", [
		broker_data(i, "token_sha256"), broker_data(i, "delay_ms"), broker_data(i, "bound_ms"),
	])
}
