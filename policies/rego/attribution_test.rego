# attributable-policy through the platform's own identities: a target that
# declares which labels carry run, task and policy passes when every sandbox
# carries them, and fails, naming the sandbox and the label, when one lacks
# them or the run identity differs between sandboxes.
package sandcheck.attribution_test

import rego.v1

import data.sandcheck.release
import data.sandcheck.test.fixtures

catalog := {"criteria": data.sandcheck.results_test.catalog.criteria, "probes": {}}

grade(rec, id) := g if {
	v := release.verdict with input as rec with data.catalog as catalog
	some g in v.criteria
	g.id == id
}

declared := {"run": "acme.io/run", "task": "acme.io/task", "policy": "acme.io/policy"}

acme_labels := {"acme.io/run": "sess-7f3", "acme.io/task": "task-12", "acme.io/policy": "egress-v3", "sandcheck.run": "run-1"}

# platform is the hardened record of a target declaring acme's labels, with
# sandboxes labelled by the platform as given.
platform(labels) := object.union(fixtures.with_view(fixtures.record_base, {"labels": labels}), {"target": object.union(fixtures.record_base.target, {"attribution": declared})})

test_platform_labels_attribute if {
	g := grade(platform(acme_labels), "attributable-policy")
	g.status == "pass"
	some r in g.reasons
	contains(r, "carries the platform's run (acme.io/run), task (acme.io/task) and policy (acme.io/policy) identities; run sess-7f3")
}

test_missing_platform_label_fails if {
	g := grade(platform(object.remove(acme_labels, ["acme.io/policy"])), "attributable-policy")
	g.status == "fail"
	g.reasons == ["sandbox shared carries no policy identity: the platform's label acme.io/policy (attribution.policy) is missing or empty (runtime view)"]
}

test_empty_platform_label_fails if {
	g := grade(platform(object.union(acme_labels, {"acme.io/task": " "})), "attributable-policy")
	g.status == "fail"
	g.reasons == ["sandbox shared carries no task identity: the platform's label acme.io/task (attribution.task) is missing or empty (runtime view)"]
}

test_sandcheck_labels_do_not_stand_in if {
	g := grade(platform({"sandcheck.run": "run-1", "sandcheck.task": "shared"}), "attributable-policy")
	g.status == "fail"
	count(g.reasons) == 3
}

test_split_run_identity_fails if {
	rec := platform(acme_labels)
	other := object.union(fixtures.sandbox, {"name": "own-1", "runtime_view": object.union(fixtures.view, {"labels": object.union(acme_labels, {"acme.io/run": "sess-other"})})})
	g := grade(object.union(rec, {"sandboxes": array.concat(rec.sandboxes, [other])}), "attributable-policy")
	g.status == "fail"
	g.reasons == ["the sandboxes of one run carry 2 run identities in acme.io/run (sess-7f3, sess-other): they cannot all be tied to the run"]
}

# Without a declaration, nothing here applies: the references keep grading
# as before.
test_no_declaration_unchanged if {
	g := grade(fixtures.record_base, "attributable-policy")
	g.status == "pass"
	every r in g.reasons {
		not contains(r, "identity")
	}
}
