package targets

import (
	"strings"
	"testing"
)

func TestIdentityFilledPerSandbox(t *testing.T) {
	src := "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n" +
		"  hostname: \"${SANDCHECK_RUN_ID}-${SANDCHECK_TASK}\"\n  labels: {platform.run: \"${SANDCHECK_RUN_ID}\", platform.task: \"${SANDCHECK_TASK}\", platform.target: \"${SANDCHECK_TARGET}\"}\n"
	tg, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{RunID: "20261130t080639-0a1b2c3d", Target: "hardened-reference", Task: "attribution.hostname"}
	if h := tg.Docker.IdentityHostname(id); h != "20261130t080639-0a1b2c3d-attribution-hostname" {
		t.Errorf("hostname %q", h)
	}
	long := id
	long.Task = strings.Repeat("task-", 20)
	if h := tg.Docker.IdentityHostname(long); len(h) > 63 || !strings.HasPrefix(h, id.RunID) || strings.HasSuffix(h, "-") {
		t.Errorf("a long task must be cut, keeping the run ID first: %q (%d)", h, len(h))
	}
	l := tg.Docker.IdentityLabels(id)
	if l["platform.run"] != id.RunID || l["platform.task"] != id.Task || l["platform.target"] != id.Target {
		t.Errorf("labels %v", l)
	}
	var none *Docker
	if none.IdentityHostname(id) != "" || none.IdentityLabels(id) != nil {
		t.Error("no docker section: no identity")
	}
}

func TestIdentityRejects(t *testing.T) {
	base := "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n"
	for name, tc := range map[string]struct{ add, want string }{
		"unknown variable": {"  hostname: \"${HOME}\"\n", "$.docker.hostname: ${HOME} is not one of"},
		"bad hostname":     {"  hostname: \"Box_1\"\n", "$.docker.hostname: must be lower-case"},
		"reserved label":   {"  labels: {sandcheck.run: x}\n", "reserved"},
		"bad label name":   {"  labels: {\"Run ID\": x}\n", "label names"},
		"label variable":   {"  labels: {platform.run: \"${RUN}\"}\n", "${RUN} is not one of"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(base+tc.add))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAttributionDeclared: a target names the platform's identity labels
// (issue 16 item 5); each of run, task and policy is required, a valid
// label key, and not one of the harness's own.
func TestAttributionDeclared(t *testing.T) {
	base := "schema: sandcheck.dev/target/v1\nname: acme\nrunner: docker\nimage: sandcheck/runner:dev\nprofile: no-network-transform\ndocker:\n  runtime: runc\n  network: none\n  labels:\n    acme.io/run: sess-1\n"
	tg, err := Parse("t.yaml", []byte(base+"attribution: {run: acme.io/run, task: acme.io/task, policy: acme.io/policy}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k := tg.Attribution.Keys(); k["run"] != "acme.io/run" || k["task"] != "acme.io/task" || k["policy"] != "acme.io/policy" {
		t.Errorf("keys %v", k)
	}
	for _, tc := range []struct{ attr, want string }{
		{"{run: acme.io/run, task: acme.io/task}", "$.attribution.policy"},
		{"{run: acme.io/run, task: 'a b', policy: p}", "$.attribution.task"},
		{"{run: sandcheck.run, task: t, policy: p}", "$.attribution.run"},
		{"{run: r, task: t, policy: p, owner: o}", "owner"},
	} {
		_, err := Parse("t.yaml", []byte(base+"attribution: "+tc.attr+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("attribution %s: %v, want an error naming %s", tc.attr, err, tc.want)
		}
	}
	if (*Attribution)(nil).Keys() != nil {
		t.Error("no declaration has keys")
	}
}
