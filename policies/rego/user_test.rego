# User policies add denials and warnings, never a pass for a built-in
# criterion: such a finding is dropped from the grading (the criterion stays
# not tested, with its warning) and listed in user_refused, which the grader
# refuses; a pass for a criterion of the team's own stands.
package sandcheck.user_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := data.sandcheck.results_test.catalog

user := {"team": {
	"pass_forged": [{"criterion": "usability", "msg": "forged"}],
	"pass_ours": [{"criterion": "team-ci-only", "msg": "ours"}],
}}

test_user_pass_for_builtin_criterion_is_dropped if {
	v := release.verdict with input as fixtures.record_base with data.catalog as catalog with data.sandcheck.user as user
	some g in v.criteria
	g.id == "usability"
	g.status == "not-tested"
	"criterion usability was not tested: no probe results" in v.warnings
	some o in v.criteria
	o.id == "team-ci-only"
	o.status == "pass"
	refused := release.user_refused with input as fixtures.record_base with data.catalog as catalog with data.sandcheck.user as user
	refused == {{"path": ["team", "pass_forged"], "criterion": "usability", "msg": "forged"}}
}
