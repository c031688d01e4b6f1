# immutable-approved-base from the image's provenance: the hardened record
# with a signed, pinned image passes; each way the image can fail fails the
# criterion with a reason naming why.
package sandcheck.image_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {"criteria": data.sandcheck.results_test.catalog.criteria, "probes": {}}

manifest := "sha256:1111111111111111111111111111111111111111111111111111111111111111"

fp := "sha256:2222222222222222222222222222222222222222222222222222222222222222"

signed := {
	"image_ref": concat("", ["127.0.0.1:5000/sandcheck/runner@", manifest]),
	"digest": manifest,
	"image_id": fixtures.digest,
	"pinned": true,
	"signature": {
		"verified": true, "key_fingerprint": fp, "tlog_required": false,
		"tlog": "transparency log not required (offline, key-based verification: no Rekor, no Fulcio)",
	},
	"sbom": {
		"path": "out/sbom.spdx.json", "digest": fp, "format": "spdx-json",
		"attested": true, "attestation_required": true,
		"packages": [{"name": "busybox", "version": "1.35.0"}],
	},
}

with_prov(patch) := object.union(fixtures.record_base, {"provenance": object.union(signed, patch)})

grade(rec, id) := g if {
	v := release.verdict with input as rec with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

base(rec) := grade(rec, "immutable-approved-base")

test_signed_pinned_image_passes if {
	g := base(with_prov({}))
	g.status == "pass"
	some r in g.reasons
	contains(r, "transparency log not required")
}

test_no_provenance_is_graded_as_before if {
	base(fixtures.record_base).status == "pass"
}

test_unsigned_image_fails if {
	g := base(with_prov({"signature": {"verified": false, "key_fingerprint": fp, "tlog_required": false, "error": "verification failed: image is not signed"}}))
	g.status == "fail"
	some r in g.reasons
	contains(r, "carries no valid signature by key")
	contains(r, "image is not signed")
}

test_tag_without_digest_fails if {
	g := base(with_prov({"pinned": false, "image_ref": "127.0.0.1:5000/sandcheck/runner:dev"}))
	g.status == "fail"
	some r in g.reasons
	contains(r, "is a tag without a digest")
}

test_other_image_ran_fails if {
	g := base(with_prov({"image_id": "sha256:3333333333333333333333333333333333333333333333333333333333333333"}))
	g.status == "fail"
	some r in g.reasons
	contains(r, "is not the verified image")
}

test_forbidden_package_fails_no_network_transform if {
	rec := object.union(with_prov({"sbom": object.union(signed.sbom, {"packages": [{"name": "busybox"}, {"name": "GCC-12", "version": "12.2.0"}]})}), {"target": object.union(fixtures.record_base.target, {"profile": "no-network-transform"})})
	g := base(rec)
	g.status == "fail"
	some r in g.reasons
	contains(r, "contains GCC-12 12.2.0, which profile no-network-transform forbids")
}

test_network_tool_fails_no_network_transform if {
	rec := object.union(with_prov({"sbom": object.union(signed.sbom, {"packages": [{"name": "curl", "version": "7.88.1"}]})}), {"target": object.union(fixtures.record_base.target, {"profile": "no-network-transform"})})
	base(rec).status == "fail"
}

test_compiler_allowed_for_package_build if {
	rec := object.union(with_prov({"sbom": object.union(signed.sbom, {"packages": [{"name": "gcc-12"}]})}), {"target": object.union(fixtures.record_base.target, {"profile": "package-build"})})
	base(rec).status == "pass"
}

test_profile_list_is_configurable if {
	rec := with_prov({"sbom": object.union(signed.sbom, {"packages": [{"name": "busybox", "version": "1.35.0"}]})})
	profiles := object.union(data.sandcheck.profiles.profiles, {"high-risk-code": object.union(data.sandcheck.profiles.profiles["high-risk-code"], {"forbidden_packages": ["busy*"]})})
	v := release.verdict with input as rec with data.catalog as catalog with data.sandcheck.profiles.profiles as profiles
	some g in v.criteria
	g.id == "immutable-approved-base"
	g.status == "fail"
	some r in g.reasons
	contains(r, "contains busybox 1.35.0, which profile high-risk-code forbids")
}

test_missing_sbom_attestation_fails_when_required if {
	g := base(with_prov({"sbom": object.union(signed.sbom, {"attested": false, "attestation_error": "no SBOM attestation"})}))
	g.status == "fail"
	some r in g.reasons
	contains(r, "has no SBOM attestation")
}

test_signed_without_sbom_unconfirmed if {
	rec := object.union(fixtures.record_base, {"provenance": object.remove(signed, ["sbom"])})
	base(rec).status == "unconfirmed"
}

waiver := {
	"id": "w.yaml:3", "criterion": "immutable-approved-base", "probe": "", "target": "hardened",
	"owner": "sec@example.com", "reason": "pilot", "expires": "2030-06-30",
	"expires_at": "2030-07-01T00:00:00Z",
}

waived(rec) := g if {
	v := release.verdict with input as rec with data.catalog as catalog with data.grading.waivers as [waiver] with time.now_ns as 1908144000000000000
	some g in v.criteria
	g.id == "immutable-approved-base"
}

test_no_waiver_excuses_a_bad_signature if {
	waived(with_prov({"signature": {"verified": false, "key_fingerprint": fp, "tlog_required": false, "error": "not signed"}})).status == "fail"
	waived(with_prov({"pinned": false})).status == "fail"
}

test_a_waiver_may_accept_a_forbidden_package if {
	rec := object.union(with_prov({"sbom": object.union(signed.sbom, {"packages": [{"name": "curl"}]})}), {"target": object.union(fixtures.record_base.target, {"profile": "no-network-transform"})})
	waived(rec).status == "waived"
}
