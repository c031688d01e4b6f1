# immutable-approved-base from the record and the runtime view: the run
# pins its image by digest, every sandbox ran exactly that image, with a
# read-only root filesystem. A profile may list approved_images (digests).
package sandcheck.criteria

import rego.v1

digest_pattern := `^sha256:[0-9a-f]{64}$`

run_image := object.get(input, ["image", "digest"], "")

unconfirmed_image_digest contains finding("immutable-approved-base", "", msg) if {
	not regex.match(digest_pattern, run_image)
	msg := sprintf("the record pins no image digest (image.digest %q): the base cannot be identified", [run_image])
}

deny_image_drift contains finding("immutable-approved-base", "", msg) if {
	regex.match(digest_pattern, run_image)
	some v in views
	known_fact(v.view, "image_digest")
	got := object.get(v.view, "image_digest", "")
	got != run_image
	msg := sprintf("sandbox %s ran image %s, not the run's image %s (runtime view)", [v.name, got, run_image])
}

deny_unapproved_image contains finding("immutable-approved-base", "", msg) if {
	approved := list(object.get(profile, "approved_images", []))
	count(approved) > 0
	not run_image in approved
	msg := sprintf("image %s is not one profile %s approves", [run_image, profile_name])
}

deny_writable_root contains finding("immutable-approved-base", "", msg) if {
	some v in views
	known_fact(v.view, "read_only_rootfs")
	v.view.read_only_rootfs != true
	msg := sprintf("sandbox %s has a writable root filesystem (runtime view)", [v.name])
}

unconfirmed_root contains finding("immutable-approved-base", "", msg) if {
	some v in views
	some field in ["read_only_rootfs", "image_digest"]
	unknown_fact(v.view, field)
	msg := sprintf("sandbox %s: the runtime could not tell its %s", [v.name, field])
}

pass_base contains finding("immutable-approved-base", "", msg) if {
	some v in views
	v.view.read_only_rootfs == true
	regex.match(digest_pattern, run_image)
	v.view.image_digest == run_image
	msg := sprintf("sandbox %s ran image %s with a read-only root (runtime view)", [v.name, run_image])
}
