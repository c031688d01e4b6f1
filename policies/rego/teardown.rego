# verified-teardown from the host's teardown check of every sandbox: what
# survived Close is listed in teardown_leftovers; a check that itself failed
# leaves the criterion unconfirmed.
package sandcheck.criteria

import rego.v1

leftovers(s) := list(object.get(s, "teardown_leftovers", []))

check_failed(l) if contains(l, "check failed")

deny_leftover contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	some l in leftovers(s)
	not check_failed(l)
	msg := sprintf("sandbox %s left %s behind after teardown (teardown check)", [s.name, l])
}

unconfirmed_teardown contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	some l in leftovers(s)
	check_failed(l)
	msg := sprintf("sandbox %s: %s", [s.name, l])
}

pass_teardown contains finding("verified-teardown", "", msg) if {
	some s in sandboxes
	count(leftovers(s)) == 0
	msg := sprintf("sandbox %s: the teardown check found nothing left", [s.name])
}

deny_network_leftover contains finding("verified-teardown", "", msg) if {
	some l in list(object.get(input, "network_leftovers", []))
	not check_failed(l)
	msg := sprintf("the harness network left %s behind after teardown (teardown check)", [l])
}

unconfirmed_network_teardown contains finding("verified-teardown", "", msg) if {
	some l in list(object.get(input, "network_leftovers", []))
	check_failed(l)
	msg := sprintf("harness network: %s", [l])
}
