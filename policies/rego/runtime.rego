# hardened-runtime from the runtime view and the profile: not privileged,
# no added capabilities, a seccomp filter, no_new_privs, a non-root user, and
# a runtime whose isolation class the profile accepts (high-risk code on a
# shared kernel fails).
package sandcheck.criteria

import rego.v1

runtimes := {r | r := input.runtime; is_string(r); r != ""} | {r |
	some v in views
	r := object.get(v.view, "runtime", "")
	r != ""
}

class_of(rt) := data.sandcheck.profiles.runtime_classes[rt]

deny_runtime_class contains finding("hardened-runtime", "", msg) if {
	some rt in runtimes
	class := class_of(rt)
	not class in profile.runtime_classes
	msg := sprintf("runtime %s is %s isolation; profile %s accepts only %s", [rt, class, profile_name, concat(", ", profile.runtime_classes)])
}

unconfirmed_runtime_class contains finding("hardened-runtime", "", msg) if {
	some rt in runtimes
	not class_of(rt)
	msg := sprintf("runtime %s has no known isolation class", [rt])
}

deny_runtime_drift contains integrity_finding("hardened-runtime", "", msg) if {
	some v in views
	rt := object.get(v.view, "runtime", "")
	rt != ""
	rt != input.runtime
	msg := sprintf("the record says runtime %s but sandbox %s ran %s (runtime view)", [input.runtime, v.name, rt])
}

pass_runtime_class contains finding("hardened-runtime", "", msg) if {
	some rt in runtimes
	class := class_of(rt)
	class in profile.runtime_classes
	msg := sprintf("runtime %s is %s isolation, which profile %s accepts", [rt, class, profile_name])
}

# The class corroborated from outside: the harness compares the kernel a
# fingerprint probe saw with the host's own (evidence kind host-kernel). A
# box on the host's kernel is shared-kernel whatever runtime it was declared
# with; claiming the host's kernel cannot make a grade softer.
kernels_shared contains i.data.inside_release if {
	some r in results
	some i in evidence(r)
	i.source == "runtime"
	i.kind == "host-kernel"
	object.get(i, ["data", "shared"], "") == "true"
}

deny_runtime_class_corroborated contains finding("hardened-runtime", "", msg) if {
	some k in kernels_shared
	not "shared-kernel" in profile.runtime_classes
	msg := sprintf("the kernel inside the box (%s) is the host's, compared from outside: shared-kernel isolation; profile %s accepts only %s", [k, profile_name, concat(", ", profile.runtime_classes)])
}

deny_runtime_claim contains integrity_finding("hardened-runtime", "", msg) if {
	some k in kernels_shared
	some rt in runtimes
	class := class_of(rt)
	class != "shared-kernel"
	msg := sprintf("runtime %s is declared %s isolation, but the kernel inside the box (%s) is the host's, compared from outside", [rt, class, k])
}

root_users := {"", "0", "root", "0:0", "root:root"}

# weak_settings lists what makes one sandbox's runtime soft.
weak_settings(view) := ((({"privileged" | view.privileged == true} | {sprintf("capabilities added: %s", [concat(", ", sort(list(view.cap_add)))]) |
	count(list(view.cap_add)) > 0
}) | {"seccomp unconfined" |
	known_fact(view, "seccomp")
	object.get(view, "seccomp", "") in {"", "unconfined"}
}) | {"no_new_privileges off" |
	known_fact(view, "no_new_privileges")
	view.no_new_privileges != true
}) | {sprintf("runs as root (user %q)", [object.get(view, "user", "")]) |
	known_fact(view, "user")
	object.get(view, "user", "") in root_users
}

deny_soft_runtime contains finding("hardened-runtime", "", msg) if {
	some v in views
	some w in weak_settings(v.view)
	msg := sprintf("sandbox %s: %s (runtime view)", [v.name, w])
}

unconfirmed_runtime contains finding("hardened-runtime", "", msg) if {
	some v in views
	some field in ["seccomp", "no_new_privileges", "user", "cap_add"]
	unknown_fact(v.view, field)
	msg := sprintf("sandbox %s: the runtime could not tell its %s", [v.name, field])
}

# Dropping every capability is the hardened default; keeping the engine's
# defaults is weaker but not an escape on its own.
warn_caps_kept contains finding("hardened-runtime", "", msg) if {
	some v in views
	not "ALL" in list(v.view.cap_drop)
	msg := sprintf("sandbox %s keeps the engine's default capabilities (no cap_drop ALL)", [v.name])
}

pass_runtime contains finding("hardened-runtime", "", msg) if {
	some v in views
	count(weak_settings(v.view)) == 0
	msg := sprintf("sandbox %s: unprivileged, no added capabilities, seccomp %s, no_new_privileges, user %s (runtime view)", [v.name, v.view.seccomp, v.view.user])
}
