# Tests of the exposure facts (exposure.rego): a honeytoken probe's
# "blocked" while the runtime mounts the planted file into the box is
# unconfirmed; without the mount, or with a host fact of the refusal, it
# stands. They use a small catalog of their own.
package sandcheck.exposure_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {
	"criteria": [
		"no-ambient-cloud-identity", "no-host-mount", "bounded-resources", "default-deny-egress",
		"immutable-approved-base", "isolated-scratch", "controlled-output", "attributable-policy",
		"verified-teardown", "hardened-runtime", "usability",
	],
	"probes": {"metadata.k8s-service-account": {
		"category": "metadata", "criterion": "no-ambient-cloud-identity", "severity": "critical",
		"expect": {"default": "blocked"}, "host": ["honeytoken"],
	}},
}

res(outcome, items) := {
	"probe": "metadata.k8s-service-account",
	"category": "metadata",
	"criterion": "no-ambient-cloud-identity",
	"severity": "critical",
	"outcome": outcome,
	"expected": "blocked",
	"detail": "no service-account token found",
	"evidence": array.concat([{"source": "canary", "kind": "honeytoken", "summary": "none of the 1 honeytoken(s) the harness planted for this probe was proved read"}], items),
	"seconds": 0.1,
}

exposed := {"source": "runtime", "kind": "honeytoken-exposed", "summary": "the runtime mounts 1 of the 1 file(s) the harness planted for this probe into the box: service-account token at /var/run/secrets/kubernetes.io/serviceaccount/token (read-only)", "data": {"mounted": "1", "planted": "1"}}

record(results) := object.union(fixtures.record_base, {"results": results})

findings(results) := {f |
	some x in release.findings with input as record(results) with data.catalog as catalog
	f := {"kind": x.kind, "probe": x.probe, "msg": x.msg}
}

kinds_for(results) := {f.kind | some f in findings(results); f.probe == "metadata.k8s-service-account"}

status(results) := g.status if {
	v := release.verdict with input as record(results) with data.catalog as catalog
	some g in v.criteria
	g.id == "no-ambient-cloud-identity"
}

# A lying probe: "blocked", nothing proved read, the token mounted in the box.
test_blocked_beside_mounted_token_is_unconfirmed if {
	r := res("blocked", [exposed])
	kinds_for([r]) == {"unconfirmed"}
	status([r]) == "unconfirmed"
	some f in findings([r])
	contains(f.msg, "reported blocked but no host fact confirms it, and the planted file is in the box: runtime/honeytoken-exposed")
	contains(f.msg, "/var/run/secrets/kubernetes.io/serviceaccount/token")
}

# Nothing of the harness's is mounted: the claim stands as before.
test_blocked_without_mount_passes if {
	r := res("blocked", [])
	kinds_for([r]) == {"pass"}
	status([r]) == "pass"
}

# A host fact of the refusal lets the claim stand beside the mount.
test_blocked_with_host_refusal_passes if {
	refused := {"source": "tracer", "kind": "tracer-syscall", "indicates": "blocked", "summary": "the kernel refused the read"}
	r := res("blocked", [exposed, refused])
	kinds_for([r]) == {"pass"}
}

# The read proved: escaped, whatever the mount says.
test_read_proved_fails if {
	read := {"source": "canary", "kind": "honeytoken", "indicates": "escaped", "summary": "the probe proved it read honeytoken(s) the harness planted for this run: service-account token"}
	r := object.union(res("escaped", [exposed]), {"evidence": [read, exposed]})
	status([r]) != "pass"
	every f in findings([r]) {
		not contains(f.msg, "planted file is in the box")
	}
}
