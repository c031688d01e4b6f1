# Profiles: every one names its network, destinations, runtime classes and
# the probes it must block and the workloads that must succeed; the runtime
# class, network and destination rules follow the profile.
package sandcheck.profiles_test

import rego.v1

import data.sandcheck.criteria
import data.sandcheck.profiles
import data.sandcheck.release
import data.sandcheck.test.fixtures

guide := {"no-network-transform", "package-build", "brokered-data-task", "mediated-browser", "high-risk-code", "human-approved-publish"}

as_profile(p, rec) := object.union(rec, {"target": object.union(rec.target, {"profile": p})})

on_runtime(rt, rec) := object.union(fixtures.with_view(rec, {"runtime": rt}), {"runtime": rt})

status(rec, id) := g.status if {
	v := release.verdict with input as rec with data.catalog as data.sandcheck.results_test.catalog
	some g in v.criteria
	g.id == id
}

test_every_guide_profile_is_defined if {
	object.keys(profiles.profiles) == guide
	every _, p in profiles.profiles {
		p.network in {"none", "allowlist"}
		is_array(p.allowed_destinations)
		count(p.runtime_classes) > 0
		count(p.must_block) > 0
		count(p.must_succeed) > 0
	}
}

test_no_network_profiles_allow_no_destination if {
	every name in {"no-network-transform", "high-risk-code"} {
		profiles.profiles[name].network == "none"
		profiles.profiles[name].allowed_destinations == []
	}
}

test_high_risk_code_refuses_shared_kernel if {
	status(on_runtime("runc", as_profile("high-risk-code", fixtures.record_base)), "hardened-runtime") == "fail"
	status(on_runtime("runsc", as_profile("high-risk-code", fixtures.record_base)), "hardened-runtime") == "pass"
	status(on_runtime("kata", as_profile("high-risk-code", fixtures.record_base)), "hardened-runtime") == "pass"
}

kernel_seen(shared) := {"results": [{
	"probe": "fingerprint.runtime", "category": "fingerprint", "criterion": "hardened-runtime",
	"severity": "info", "outcome": "not-applicable", "expected": "not-applicable", "detail": "d",
	"evidence": [{"source": "runtime", "kind": "host-kernel", "summary": "s", "data": {"inside_release": "6.1.0", "host_release": "6.1.0", "shared": shared}}],
}]}

fp_catalog := object.union(data.sandcheck.results_test.catalog, {"probes": {"fingerprint.runtime": {
	"category": "fingerprint", "criterion": "hardened-runtime",
	"severity": "info", "expect": {"default": "not-applicable"},
}}})

fp_status(rec, id) := g.status if {
	v := release.verdict with input as rec with data.catalog as fp_catalog
	some g in v.criteria
	g.id == id
}

test_high_risk_code_uses_the_corroborated_class if {
	# Declared runsc, but the harness saw the host's kernel inside: fails, as a forged claim.
	claimed := object.union(on_runtime("runsc", as_profile("high-risk-code", fixtures.record_base)), kernel_seen("true"))
	fp_status(claimed, "hardened-runtime") == "fail"
	count(criteria.deny_runtime_claim) == 1 with input as claimed with data.catalog as fp_catalog
	count(criteria.deny_runtime_class_corroborated) == 1 with input as claimed with data.catalog as fp_catalog

	# Declared runsc and a kernel of its own: passes.
	own := object.union(on_runtime("runsc", as_profile("high-risk-code", fixtures.record_base)), kernel_seen("false"))
	fp_status(own, "hardened-runtime") == "pass"

	# A shared kernel is fine where the profile accepts it, and runc claims nothing more.
	shared := object.union(on_runtime("runc", as_profile("no-network-transform", fixtures.record_base)), kernel_seen("true"))
	fp_status(shared, "hardened-runtime") == "pass"
}

test_other_profiles_accept_shared_kernel if {
	every name in guide - {"high-risk-code"} {
		status(on_runtime("runc", as_profile(name, fixtures.record_base)), "hardened-runtime") == "pass"
	}
}

test_unknown_runtime_is_unconfirmed if {
	status(on_runtime("mystery", fixtures.record_base), "hardened-runtime") == "unconfirmed"
}

test_network_none_profiles_fail_attached_network if {
	every name in {"no-network-transform", "high-risk-code"} {
		status(as_profile(name, fixtures.with_view(fixtures.record_base, {"network_mode": "bridge"})), "default-deny-egress") == "fail"
	}
}

test_allowlist_profiles_need_egress_evidence if {
	every name in {"package-build", "brokered-data-task", "mediated-browser", "human-approved-publish"} {
		status(as_profile(name, fixtures.with_view(fixtures.record_base, {"network_mode": "bridge"})), "default-deny-egress") == "unconfirmed"
	}
}

egress_result(to) := {
	"probe": "metadata.aws-imdsv1", "category": "metadata", "criterion": "no-ambient-cloud-identity",
	"severity": "critical", "outcome": "escaped", "expected": "blocked", "detail": "d",
	"evidence": [{"source": "canary", "kind": "connect", "summary": "s", "indicates": "escaped", "data": {"destination": to}}],
}

test_destination_policy_follows_profile if {
	rec := as_profile("package-build", object.union(fixtures.record_base, {"results": [egress_result("package-mirror")]}))
	count(criteria.pass_destination) == 1 with input as rec
	count(criteria.deny_destination) == 0 with input as rec
	bad := as_profile("package-build", object.union(fixtures.record_base, {"results": [egress_result("pastebin")]}))
	count(criteria.deny_destination) == 1 with input as bad
}

test_profile_overrides_catalog_default if {
	r := {"probe": "workload.transform-csv"}
	cat := {"probes": {"workload.transform-csv": {"criterion": "usability", "expect": {"default": "blocked"}}}}
	criteria.expected(r) == "escaped" with input as fixtures.record_base with data.catalog as cat with input.target.profile as "no-network-transform"
}

test_catalog_profile_entry_beats_profile_lists if {
	r := {"probe": "syscalls.bpf"}
	cat := {"probes": {"syscalls.bpf": {"criterion": "hardened-runtime", "expect": {"default": "blocked", "package-build": "escaped"}}}}
	criteria.expected(r) == "escaped" with input.target.profile as "package-build" with data.catalog as cat
}

test_coverage_warns_when_required_probes_did_not_run if {
	cat := {"criteria": [], "probes": {"egress.dns-tunnel": {"criterion": "default-deny-egress", "expect": {"default": "blocked"}}}}
	some f in criteria.warn_coverage with input as fixtures.record_base with data.catalog as cat
	f.msg == "profile high-risk-code requires probes matching egress.* to be blocked; none ran"
}

test_publish_reaches_only_its_publishing_endpoint if {
	rec := as_profile("human-approved-publish", object.union(fixtures.record_base, {"results": [egress_result("tool-broker")]}))
	count(criteria.pass_destination) == 1 with input as rec
	count(criteria.deny_destination) == 0 with input as rec
	bad := as_profile("human-approved-publish", object.union(fixtures.record_base, {"results": [egress_result("package-mirror")]}))
	count(criteria.deny_destination) == 1 with input as bad
}

test_every_profile_requires_a_workload if {
	every _, p in profiles.profiles {
		some pattern in p.must_succeed
		startswith(pattern, "workload.")
	}
}
