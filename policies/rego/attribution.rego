# attributable-policy from the record's own fields: a verdict is worth
# something only if it names the run, the target file (by digest), the
# image (by digest), the profile, the policy and who started the run.
package sandcheck.criteria

import rego.v1

# attribution_fields maps a record path to what it proves and the pattern it
# must match.
attribution_fields := {
	"run_id": {"path": ["run_id"], "pattern": `^\S+$`},
	"started_by": {"path": ["started_by"], "pattern": `^\S.*$`},
	"target.name": {"path": ["target", "name"], "pattern": `^\S.*$`},
	"target.digest": {"path": ["target", "digest"], "pattern": digest_pattern},
	"target.profile": {"path": ["target", "profile"], "pattern": `^\S+$`},
	"image.digest": {"path": ["image", "digest"], "pattern": digest_pattern},
	"tool.version": {"path": ["tool", "version"], "pattern": `^\S+$`},
	"tool.policy_version": {"path": ["tool", "policy_version"], "pattern": digest_pattern},
	"runtime": {"path": ["runtime"], "pattern": `^\S+$`},
}

field_value(f) := v if {
	v := object.get(input, attribution_fields[f].path, "")
	is_string(v)
} else := ""

deny_unattributed contains finding("attributable-policy", "", msg) if {
	some f, spec in attribution_fields
	not regex.match(spec.pattern, field_value(f))
	msg := sprintf("the record's %s is %q: the run cannot be attributed", [f, field_value(f)])
}

deny_unknown_profile contains finding("attributable-policy", "", msg) if {
	profile_name != ""
	not data.sandcheck.profiles.profiles[profile_name]
	msg := sprintf("profile %q is not a known profile (known: %s)", [profile_name, concat(", ", sort(object.keys(data.sandcheck.profiles.profiles)))])
}

pass_attributed contains finding("attributable-policy", "", msg) if {
	every f, spec in attribution_fields {
		regex.match(spec.pattern, field_value(f))
	}
	profile
	msg := sprintf("run %s started by %s: target %s (%s), image %s, profile %s, policy %s, sandcheck %s", [
		input.run_id, input.started_by, input.target.name, input.target.digest, input.image.digest,
		profile_name, input.tool.policy_version, input.tool.version,
	])
}

# A stored run re-graded under another policy: the verdict is the new
# policy's, the record names the old one.
warn_policy_version contains finding("attributable-policy", "", msg) if {
	recorded := field_value("tool.policy_version")
	recorded != ""
	current := data.grading.policy_version
	recorded != current
	msg := sprintf("the record names policy %s but it was graded with %s", [recorded, current])
}
