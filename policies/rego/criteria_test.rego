# One test per criterion: the hardened fixture record passes it, and the
# record changed in one place fails it (or leaves it unconfirmed) with a
# reason that cites the sandbox, field or probe behind it.
package sandcheck.criteria_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {"criteria": data.sandcheck.results_test.catalog.criteria, "probes": {}}

grade(rec, id) := g if {
	v := release.verdict with input as rec with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

hardened := fixtures.record_base

test_hardened_record_criteria_pass if {
	v := release.verdict with input as hardened with data.catalog as catalog
	every g in v.criteria {
		g.status in {"pass", "not-tested"}
	}
	{g.id | some g in v.criteria; g.status == "not-tested"} == {"usability"}
	not v.pass # no probe result settled anything
}

test_no_ambient_cloud_identity if {
	grade(hardened, "no-ambient-cloud-identity").status == "pass"
	g := grade(fixtures.with_view(hardened, {"env_names": ["PATH", "GITHUB_TOKEN"]}), "no-ambient-cloud-identity")
	g.status == "fail"
	"sandbox shared has credential-shaped environment variable GITHUB_TOKEN (runtime view)" in g.reasons
}

test_no_ambient_cloud_identity_credential_mount if {
	m := {"type": "tmpfs", "source": "", "destination": "/var/run/secrets/kubernetes.io", "read_only": true}
	g := grade(fixtures.with_view(hardened, {"mounts": [m]}), "no-ambient-cloud-identity")
	g.status == "fail"
}

test_no_host_mount if {
	m := {"type": "bind", "source": "/etc", "destination": "/etc-host", "read_only": true}
	g := grade(fixtures.with_view(hardened, {"mounts": [m]}), "no-host-mount")
	g.status == "fail"
	g.reasons == ["sandbox shared mounts host path /etc at /etc-host read-only (runtime view)"]
}

# The harness's read-only inputs bind (recorded in target.inputs) is the
# platform handing over inputs; the same bind writable, or another folder
# at the inputs path, is a host mount.
test_no_host_mount_inputs if {
	m := {"type": "bind", "source": "/tmp/run/inputs", "destination": "/inputs", "read_only": true}
	declared := object.union(hardened, {"target": object.union(hardened.target, {"inputs": {"path": "/inputs", "source": "/tmp/run/inputs", "read_only": true}})})
	grade(fixtures.with_view(declared, {"mounts": [m]}), "no-host-mount").status == "pass"
	writable := object.union(m, {"read_only": false})
	grade(fixtures.with_view(declared, {"mounts": [writable]}), "no-host-mount").status == "fail"
	other := object.union(m, {"source": "/etc"})
	grade(fixtures.with_view(declared, {"mounts": [other]}), "no-host-mount").status == "fail"
	grade(fixtures.with_view(hardened, {"mounts": [m]}), "no-host-mount").status == "fail"
}

test_no_host_mount_privileged if {
	grade(fixtures.with_view(hardened, {"privileged": true}), "no-host-mount").status == "fail"
}

test_no_host_mount_unmasked_proc if {
	g := grade(fixtures.with_view(hardened, {"masked_paths": []}), "no-host-mount")
	"sandbox shared does not mask /proc/kcore, /proc/keys, /proc/sched_debug, /proc/timer_list (runtime view)" in g.reasons
}

test_bounded_resources if {
	g := grade(fixtures.with_view(hardened, {"memory_bytes": 0}), "bounded-resources")
	g.status == "fail"
	g.reasons == ["sandbox shared has no memory limit (runtime view memory_bytes)"]
}

test_bounded_resources_unknown_is_unconfirmed if {
	g := grade(fixtures.with_view(hardened, {"pids_limit": 0, "unknown": ["pids_limit"]}), "bounded-resources")
	g.status == "unconfirmed"
}

test_default_deny_egress if {
	grade(hardened, "default-deny-egress").status == "pass"
	g := grade(fixtures.with_view(hardened, {"network_mode": "bridge"}), "default-deny-egress")
	g.status == "fail"
	g.reasons == [`sandbox shared is attached to network "bridge" but profile high-risk-code allows no network (runtime view)`]
}

test_default_deny_egress_host_network_fails_any_profile if {
	rec := object.union(fixtures.with_view(hardened, {"network_mode": "host"}), {"target": object.union(hardened.target, {"profile": "package-build"})})
	grade(rec, "default-deny-egress").status == "fail"
}

test_immutable_approved_base if {
	grade(fixtures.with_view(hardened, {"read_only_rootfs": false}), "immutable-approved-base").status == "fail"
	grade(fixtures.with_view(hardened, {"image_digest": "sha256:other"}), "immutable-approved-base").status == "fail"
	grade(object.union(hardened, {"image": {"ref": "x", "digest": ""}}), "immutable-approved-base").status == "unconfirmed"
}

test_isolated_scratch if {
	m := {"type": "volume", "source": "cache", "destination": "/cache", "read_only": false}
	g := grade(fixtures.with_view(hardened, {"mounts": [m]}), "isolated-scratch")
	g.status == "fail"
	g.reasons == ["sandbox shared has writable volume storage cache at /cache that outlives the run (runtime view)"]
}

test_controlled_output if {
	m := {"type": "bind", "source": "/srv/out", "destination": "/out", "read_only": false}
	g := grade(fixtures.with_view(hardened, {"mounts": [m]}), "controlled-output")
	g.status == "fail"
	g.reasons == ["sandbox shared can write host path /srv/out directly, past the output broker (runtime view)"]
}

test_attributable_policy if {
	grade(hardened, "attributable-policy").status == "pass"
	g := grade(object.union(hardened, {"started_by": ""}), "attributable-policy")
	g.status == "fail"
	g.reasons == [`the record's started_by is "": the run cannot be attributed`]
}

test_attributable_policy_unknown_profile if {
	rec := object.union(hardened, {"target": object.union(hardened.target, {"profile": "anything-goes"})})
	g := grade(rec, "attributable-policy")
	g.status == "fail"
	some r in g.reasons
	startswith(r, `profile "anything-goes" is not a known profile`)
}

test_verified_teardown if {
	sb := object.union(fixtures.sandbox, {"teardown_leftovers": ["container c1"]})
	g := grade(object.union(hardened, {"sandboxes": [sb]}), "verified-teardown")
	g.status == "fail"
	g.reasons == ["sandbox shared left container c1 behind after teardown (teardown check)"]
}

test_verified_teardown_check_failed_is_unconfirmed if {
	sb := object.union(fixtures.sandbox, {"teardown_leftovers": ["teardown check failed: engine gone"]})
	grade(object.union(hardened, {"sandboxes": [sb]}), "verified-teardown").status == "unconfirmed"
}

# No check, no pass: a sandbox no teardown check ran for (no verifier: a
# command target without a list step, OpenSandbox) passed with "the
# teardown check found nothing left"; now the criterion is unconfirmed and
# says why, and only a check that ran and found nothing passes.
test_verified_teardown_without_check_is_unconfirmed if {
	unchecked := object.remove(fixtures.sandbox, ["teardown_checked"])
	g := grade(object.union(hardened, {"sandboxes": [unchecked]}), "verified-teardown")
	g.status == "unconfirmed"
	g.reasons == ["sandbox shared: no teardown check ran after it was closed (the runner has no teardown verifier, e.g. a command target without a list step): nothing shows what survived it"]
	checked := grade(hardened, "verified-teardown")
	checked.status == "pass"
	checked.reasons == ["sandbox shared: the teardown check found nothing left"]
	mixed := grade(object.union(hardened, {"sandboxes": [fixtures.sandbox, object.union(unchecked, {"id": "c2", "name": "other"})]}), "verified-teardown")
	mixed.status == "unconfirmed"
}

test_hardened_runtime if {
	grade(hardened, "hardened-runtime").status == "pass"
	g := grade(fixtures.with_view(hardened, {"cap_add": ["SYS_ADMIN"], "seccomp": "unconfined"}), "hardened-runtime")
	g.status == "fail"
	g.reasons == [
		"sandbox shared: capabilities added: SYS_ADMIN (runtime view)",
		"sandbox shared: seccomp unconfined (runtime view)",
	]
}

test_hardened_runtime_root_user if {
	grade(fixtures.with_view(hardened, {"user": "0:0"}), "hardened-runtime").status == "fail"
}

test_hardened_runtime_drift_is_integrity if {
	g := grade(fixtures.with_view(hardened, {"runtime": "runc"}), "hardened-runtime")
	g.status == "fail"
	"the record says runtime runsc but sandbox shared ran runc (runtime view)" in g.reasons
}

test_no_view_leaves_host_criteria_unconfirmed if {
	sb := object.remove(fixtures.sandbox, ["runtime_view"])
	rec := object.union(hardened, {"sandboxes": [object.union(sb, {"probes": ["syscalls.bpf"]})]})
	v := release.verdict with input as rec with data.catalog as data.sandcheck.results_test.catalog
	some g in v.criteria
	g.id == "hardened-runtime"
	g.status == "unconfirmed"
}

test_usability_not_tested_warns if {
	v := release.verdict with input as hardened with data.catalog as catalog
	"criterion usability was not tested: no probe results" in v.warnings
}

test_verified_teardown_network if {
	g := grade(object.union(hardened, {"network_leftovers": ["bridge br-1234"]}), "verified-teardown")
	g.status == "fail"
	"the harness network left bridge br-1234 behind after teardown (teardown check)" in g.reasons
}
