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

# --- each sandbox attributable through the platform's own identities --------
#
# The threat model asks that each sandbox be attributable to its run, its task
# and the policy it runs under, through identities the platform itself gives.
# A target names the platform's labels that carry them (target.attribution:
# {run, task, policy} -> label); every sandbox's runtime view must carry each,
# not empty, and all the sandboxes of one run the same run identity. Without
# that declaration the attribution.hostname probe's host evidence grades the
# labels against sandcheck's own run, target and task.

declared_identities := object.get(input.target, "attribution", {})

# identity_value is the value of the label key on a sandbox's runtime view;
# undefined when the label is missing or empty.
identity_value(view, key) := v if {
	labels := object.get(view, "labels", {})
	is_object(labels)
	v := object.get(labels, key, "")
	is_string(v)
	trim_space(v) != ""
}

deny_sandbox_unattributed contains finding("attributable-policy", "", msg) if {
	some v in views
	some what, key in declared_identities
	not identity_value(v.view, key)
	msg := sprintf("sandbox %s carries no %s identity: the platform's label %s (attribution.%s) is missing or empty (runtime view)", [v.name, what, key, what])
}

# run_identities are the distinct run identities the sandboxes carry.
run_identities contains identity_value(v.view, declared_identities.run) if {
	some v in views
}

deny_run_identity_split contains finding("attributable-policy", "", msg) if {
	count(run_identities) > 1
	msg := sprintf("the sandboxes of one run carry %d run identities in %s (%s): they cannot all be tied to the run", [
		count(run_identities), declared_identities.run, concat(", ", sort(run_identities)),
	])
}

pass_sandbox_attributed contains finding("attributable-policy", "", msg) if {
	count(declared_identities) > 0
	count(views) > 0
	every v in views {
		every _, key in declared_identities {
			identity_value(v.view, key)
		}
	}
	count(run_identities) == 1
	msg := sprintf("every sandbox (%d) carries the platform's run (%s), task (%s) and policy (%s) identities; run %s", [
		count(views), declared_identities.run, declared_identities.task, declared_identities.policy, concat("", run_identities),
	])
}
