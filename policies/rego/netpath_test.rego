# Tests of the path facts (netpath.rego): a probe's "blocked" against a path
# the host found open from the sandbox's network namespace is unconfirmed;
# a closed path, or another host fact of the refusal, lets it stand. They use
# a small catalog of their own.
package sandcheck.netpath_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {
	"criteria": [
		"no-ambient-cloud-identity", "no-host-mount", "bounded-resources", "default-deny-egress",
		"immutable-approved-base", "isolated-scratch", "controlled-output", "attributable-policy",
		"verified-teardown", "hardened-runtime", "usability",
	],
	"probes": {
		"egress.tcp-ports": {
			"category": "egress", "criterion": "default-deny-egress", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["canary:sink", "netpath:outside"],
		},
		"egress.raw-socket": {
			"category": "egress", "criterion": "default-deny-egress", "severity": "high",
			"expect": {"default": "blocked"}, "host": ["canary:sink", "netpath:outside-route"],
		},
		"metadata.aws-imdsv1": {
			"category": "metadata", "criterion": "no-ambient-cloud-identity", "severity": "critical",
			"expect": {"default": "blocked"}, "host": ["canary:metadata", "netpath:metadata"],
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
	"detail": "blocked: connection refused",
	"evidence": array.concat([{"source": "canary", "kind": "sink-canary", "summary": "nothing with the probe's token reached the sink canary"}], items),
	"seconds": 0.1,
}

open_item := {"source": "runtime", "kind": "netpath-open", "summary": "from the sandbox's network namespace the host connected to the outside address's TCP sinks at 198.51.100.10:80 (tcp, before the probe ran)", "data": {"path": "outside", "open": "198.51.100.10:80"}}

closed_item := {"source": "runtime", "kind": "netpath-closed", "indicates": "blocked", "summary": "from the sandbox's network namespace no TCP connection to the metadata service got through: 169.254.169.254:80 unreachable", "data": {"path": "metadata"}}

unknown_item := {"source": "runtime", "kind": "netpath-unknown", "summary": "the host could not tell", "data": {"path": "outside"}}

record(results) := object.union(fixtures.record_base, {"results": results})

findings(results) := {f |
	some x in release.findings with input as record(results) with data.catalog as catalog
	f := {"kind": x.kind, "probe": x.probe, "msg": x.msg}
}

kinds_for(results, probe) := {f.kind | some f in findings(results); f.probe == probe}

status(results, id) := g.status if {
	v := release.verdict with input as record(results) with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

# A lying probe: "blocked", the canary saw nothing, the path was open.
test_blocked_against_open_path_is_unconfirmed if {
	r := res("egress.tcp-ports", "blocked", [open_item])
	kinds_for([r], "egress.tcp-ports") == {"unconfirmed"}
	status([r], "default-deny-egress") == "unconfirmed"
	some f in findings([r])
	f.probe == "egress.tcp-ports"
	contains(f.msg, "reported blocked but no host fact confirms it, and the path is open: runtime/netpath-open")
	contains(f.msg, "198.51.100.10:80")
}

# A closed path confirms the blocked claim, and says so.
test_blocked_on_closed_path_passes_confirmed if {
	r := res("metadata.aws-imdsv1", "blocked", [closed_item])
	kinds_for([r], "metadata.aws-imdsv1") == {"pass"}
	some f in findings([r])
	f.probe == "metadata.aws-imdsv1"
	contains(f.msg, "blocked as expected (confirmed by runtime/netpath-closed)")
}

# No path item (the harness has no network to dial: the runtime view tells
# a box with none) or one the host could not tell: today's grading.
test_blocked_without_path_fact_keeps_its_grade if {
	kinds_for([res("egress.tcp-ports", "blocked", [])], "egress.tcp-ports") == {"pass"}
	kinds_for([res("egress.tcp-ports", "blocked", [unknown_item])], "egress.tcp-ports") == {"pass"}
}

# Blocked in-process while the path is open (no NET_RAW, a seccomp filter
# refusing socket()): it stands only with another host fact of the refusal.
test_open_path_with_independent_host_refusal_passes if {
	tr := {"source": "tracer", "kind": "tracer-syscall", "indicates": "blocked", "summary": "the sandbox's seccomp filter refused socket(AF_INET, SOCK_RAW)"}
	r := res("egress.raw-socket", "blocked", [open_item, tr])
	kinds_for([r], "egress.raw-socket") == {"pass"}
}

# A closed path elsewhere is no confirmation against an open one.
test_closed_path_does_not_outweigh_open_path if {
	r := res("egress.tcp-ports", "blocked", [open_item, closed_item])
	kinds_for([r], "egress.tcp-ports") == {"unconfirmed"}
}

# An escape the canary confirms is graded as before.
test_escape_with_open_path_fails if {
	hit := {"source": "canary", "kind": "sink-hit", "indicates": "escaped", "summary": "1 contact(s) with the probe's token reached the sink canary", "data": {"destination": "outside"}}
	r := res("egress.tcp-ports", "escaped", [open_item, hit])
	"deny" in kinds_for([r], "egress.tcp-ports")
	not "unconfirmed" in kinds_for([r], "egress.tcp-ports")
}

none_item := {"source": "runtime", "kind": "netpath-none", "summary": "the host cannot enter this sandbox's network namespace (the runner gives no path fact)", "data": {"path": "outside"}}

# No check, no pass: on a runner whose namespace the host cannot enter
# (kubernetes, wrapper, command) a "blocked" stood on the probe's word; now
# it is unconfirmed, in its criterion and in its per-result outcome, unless
# a host fact other than a path fact confirms the refusal.
test_blocked_where_runner_gives_no_path_fact_is_unconfirmed if {
	r := res("egress.tcp-ports", "blocked", [none_item])
	kinds_for([r], "egress.tcp-ports") == {"unconfirmed"}
	status([r], "default-deny-egress") == "unconfirmed"
	some f in findings([r])
	f.msg == "probe egress.tcp-ports reported blocked but no host fact confirms it: runtime/netpath-none: the host cannot enter this sandbox's network namespace (the runner gives no path fact)"
	v := release.verdict with input as record([r]) with data.catalog as catalog
	v.results == [{"probe": "egress.tcp-ports", "effective": "unconfirmed", "expected": "blocked"}]
	tr := {"source": "tracer", "kind": "tracer-syscall", "indicates": "blocked", "summary": "the sandbox's seccomp filter refused connect"}
	kinds_for([res("egress.tcp-ports", "blocked", [none_item, tr])], "egress.tcp-ports") == {"pass"}
	escaped := res("egress.tcp-ports", "escaped", [none_item])
	w := release.verdict with input as record([escaped]) with data.catalog as catalog
	w.results[0].effective == "escaped"
}
