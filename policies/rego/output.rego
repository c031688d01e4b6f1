# controlled-output from the output release path. The output probes plant
# hostile artifacts and never judge themselves: the host's view of the
# release (evidence source "output") alone decides their outcome, so a
# probe's self-report can neither pass nor fail one.
package sandcheck.criteria

import rego.v1

# host_decides holds for probes whose catalog entry names host evidence
# that settles the outcome on its own (host: [output:release]).
host_decides(r) if "output:release" in data.catalog.probes[r.probe].host

output_items(r) := [i |
	some i in evidence(r)
	i.source == "output"
]

# host_decided is the outcome of such a probe: a host escape is taken care
# of before (it wins); a probe that says it escaped incriminates itself and
# is believed (that can only fail a criterion); withheld by the release path
# is blocked; a target without an output folder is not-applicable; anything
# else (no artifact, no release, the probe's own "blocked") is
# inconclusive.
host_decided(r) := "escaped" if {
	r.outcome == "escaped"
} else := "blocked" if {
	some i in output_items(r)
	i.indicates == "blocked"
} else := "not-applicable" if {
	some i in output_items(r)
	i.kind == "output-undeclared"
} else := "inconclusive"

# What the release did with each artifact is listed in the record's
# outputs; a flagged artifact the release handed out as-is is a finding of
# its own, whatever probe planted it.
deny_output_released_flagged contains finding("controlled-output", "", msg) if {
	some o in list(object.get(input, "outputs", []))
	o.release.mode == "bind"
	some a in list(o.release.artifacts)
	a.released == true
	some f in list(object.get(a, "flags", []))
	f in output_hostile_flags
	msg := sprintf("the %s release handed out %s (%s) as-is, flagged %s", [o.release.mode, a.path, a.kind, f])
}

output_hostile_flags := {
	"symlink-outside", "traversal-name", "control-name", "absolute-name", "special-file",
	"oversize", "archive-bomb", "secret", "eicar", "active-content", "executable",
}
