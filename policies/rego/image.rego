# immutable-approved-base from the image's provenance (the record's
# provenance section, present when the target has an image_verify section):
# the image must be pinned by digest, signed by the target's key (offline,
# key-based: the transparency log is not required), be the image the run
# started, and hold no component the profile forbids.
#
# A bad signature, a tag without a digest or a run of another image is an
# integrity finding no waiver excuses; a forbidden package may be waived.
#
# A profile's forbidden_packages (a list of globs over SBOM package names,
# lower-case) replaces the default below; set it in profiles.rego or in a
# user policy's profiles.
package sandcheck.criteria

import rego.v1

prov := input.provenance if is_object(input.provenance)

prov_digest := object.get(prov, "digest", "") if prov

compilers := [
	"gcc", "gcc-*", "g++", "g++-*", "cpp", "cpp-*", "clang", "clang-*", "llvm", "llvm-*",
	"tcc", "binutils", "binutils-*", "build-essential", "golang", "golang-*", "rustc", "cargo",
]

network_tools := [
	"curl", "libcurl*", "wget", "wget2", "netcat", "netcat-*", "ncat", "nmap", "socat",
	"openssh-client", "openssh-clients", "telnet", "inetutils-*", "ftp", "lftp", "rsync",
	"aria2", "dnsutils", "bind9-dnsutils", "tcpdump", "iputils-ping",
]

default_forbidden_packages := {"no-network-transform": array.concat(compilers, network_tools)}

forbidden_packages := list(object.get(
	data.sandcheck.profiles.profiles,
	[profile_name, "forbidden_packages"],
	object.get(default_forbidden_packages, profile_name, []),
))

deny_image_unsigned contains integrity_finding("immutable-approved-base", "", msg) if {
	prov.signature.verified != true
	msg := sprintf("image %s (%s) carries no valid signature by key %s: %s", [
		prov.image_ref, prov_digest, prov.signature.key_fingerprint,
		object.get(prov.signature, "error", "no reason recorded"),
	])
}

deny_image_tag contains integrity_finding("immutable-approved-base", "", msg) if {
	prov.pinned != true
	msg := sprintf("image %s is a tag without a digest: what runs can change under the same name (pin it as name@%s)", [prov.image_ref, prov_digest])
}

deny_image_not_verified_one contains integrity_finding("immutable-approved-base", "", msg) if {
	prov.signature.verified == true
	run_image != ""
	object.get(prov, "image_id", "") != run_image
	msg := sprintf("the run's image %s is not the verified image %s (image ID %s)", [run_image, prov_digest, object.get(prov, "image_id", "")])
}

deny_image_package contains finding("immutable-approved-base", "", msg) if {
	some p in list(object.get(prov, ["sbom", "packages"], []))
	some pattern in forbidden_packages
	glob.match(pattern, [], lower(p.name))
	msg := sprintf("image %s contains %s %s, which profile %s forbids (matches %q)", [prov_digest, p.name, object.get(p, "version", ""), profile_name, pattern])
}

deny_image_sbom_unattested contains finding("immutable-approved-base", "", msg) if {
	prov.sbom.attestation_required == true
	prov.sbom.attested != true
	msg := sprintf("image %s has no SBOM attestation by key %s: %s", [prov_digest, prov.signature.key_fingerprint, object.get(prov.sbom, "attestation_error", "")])
}

unconfirmed_image_sbom contains finding("immutable-approved-base", "", msg) if {
	prov.signature.verified == true
	not is_object(object.get(prov, "sbom", null))
	msg := sprintf("image %s is signed but the record holds no SBOM: its components cannot be checked", [prov_digest])
}

pass_image_signed contains finding("immutable-approved-base", "", msg) if {
	prov.signature.verified == true
	prov.pinned == true
	n := count(list(object.get(prov, ["sbom", "packages"], [])))
	msg := sprintf("image %s is signed by key %s (%s); its SBOM (%s) lists %d packages", [
		prov_digest, prov.signature.key_fingerprint, prov.signature.tlog,
		object.get(prov, ["sbom", "digest"], "none"), n,
	])
}

info_image_tlog contains finding("immutable-approved-base", "", msg) if {
	prov.signature.tlog_required == false
	msg := "image signatures were verified with the target's key, offline: transparency log not required"
}
