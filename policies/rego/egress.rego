# default-deny-egress from the runtime view and from destinations the host
# observed. A profile with network "none" needs every sandbox off the
# network; an allowlist profile needs every destination a probe reached to be
# one it allows. Host-observed items name their destination in
# data.destination (see docs/policy.md).
package sandcheck.criteria

import rego.v1

network_of(view) := object.get(view, "network_mode", "")

deny_host_network contains finding("default-deny-egress", "", msg) if {
	some v in views
	network_of(v.view) == "host"
	msg := sprintf("sandbox %s shares the host's network namespace (runtime view network_mode host)", [v.name])
}

deny_network_attached contains finding("default-deny-egress", "", msg) if {
	profile.network == "none"
	some v in views
	known_fact(v.view, "network_mode")
	not network_of(v.view) in {"none", "host"}
	msg := sprintf("sandbox %s is attached to network %q but profile %s allows no network (runtime view)", [v.name, network_of(v.view), profile_name])
}

# destinations lists every host-observed item that names where traffic went.
destinations := [{"result": r, "item": i, "to": i.data.destination} |
	some r in results
	some i in evidence(r)
	i.source != "probe"
	is_string(object.get(i, ["data", "destination"], null))
]

deny_destination contains finding("default-deny-egress", d.result.probe, msg) if {
	some d in destinations
	d.item.indicates == "escaped"
	not d.to in list(object.get(profile, "allowed_destinations", []))
	msg := sprintf("probe %s reached %s, which profile %s does not allow: %s/%s: %s", [d.result.probe, d.to, profile_name, d.item.source, d.item.kind, d.item.summary])
}

pass_destination contains finding("default-deny-egress", d.result.probe, msg) if {
	some d in destinations
	d.item.indicates == "escaped"
	d.to in list(object.get(profile, "allowed_destinations", []))
	msg := sprintf("probe %s reached %s, which profile %s allows (%s/%s)", [d.result.probe, d.to, profile_name, d.item.source, d.item.kind])
}

# An allowlist profile on an attached network: default deny holds only if
# egress probes showed it.
unconfirmed_egress_untested contains finding("default-deny-egress", "", msg) if {
	profile.network == "allowlist"
	some v in views
	not network_of(v.view) in {"none", "host"}
	not egress_probed
	msg := sprintf("sandbox %s is attached to network %q and no egress probe settled what it can reach", [v.name, network_of(v.view)])
}

egress_probed if {
	some g in counted
	"default-deny-egress" in g.criteria
}

unconfirmed_network contains finding("default-deny-egress", "", msg) if {
	some v in views
	unknown_fact(v.view, "network_mode")
	msg := sprintf("sandbox %s: the runtime could not tell its network", [v.name])
}

pass_no_network contains finding("default-deny-egress", "", msg) if {
	some v in views
	known_fact(v.view, "network_mode")
	network_of(v.view) == "none"
	msg := sprintf("sandbox %s has no network (runtime view network_mode none)", [v.name])
}
