package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

func TestLabelBinding(t *testing.T) {
	const run, target, task = "20261130t081928-d952e6b7", "hardened-reference", "shared"
	harnessOnly := map[string]string{"sandcheck.run": run, "sandcheck.target": target, "sandcheck.task": task, "org.opencontainers.image.title": "x"}
	missing, binding := labelBinding(harnessOnly, run, target, task)
	if !slices.Equal(missing, []string{"run", "task"}) || len(binding) != 0 {
		t.Errorf("the harness's own labels must not count: missing %v, binding %v", missing, binding)
	}
	platform := map[string]string{"sandcheck.task": task, "platform.run": run, "platform.target": target, "platform.task": task}
	if missing, binding := labelBinding(platform, run, target, task); len(missing) != 0 || len(binding) != 3 {
		t.Errorf("missing %v, binding %v", missing, binding)
	}
	// Run and task labels attribute a sandbox without a label naming the
	// target (issue 24 item 10: acme.io.run/acme.io.task failed before).
	runTask := map[string]string{"acme.io.run": run, "acme.io.task": task}
	if missing, binding := labelBinding(runTask, run, target, task); len(missing) != 0 || len(binding) != 2 {
		t.Errorf("run and task labels: missing %v, binding %v", missing, binding)
	}
	delete(platform, "platform.task")
	if missing, _ := labelBinding(platform, run, target, task); !slices.Equal(missing, []string{"task"}) {
		t.Errorf("missing %v, want [task]", missing)
	}
}

// TestDeclaredIdentity: with the platform's identity labels declared, the
// platform's own values attribute the sandbox (they never name sandcheck's
// run); a missing or empty one, or only the harness's labels, does not.
func TestDeclaredIdentity(t *testing.T) {
	keys := map[string]string{"run": "acme.io/run", "task": "acme.io/task", "policy": "acme.io/policy"}
	labels := map[string]string{"acme.io/run": "sess-7f3", "acme.io/task": "task-12", "acme.io/policy": "egress-v3"}
	it := declaredIdentity(evidence.Item{Kind: "labels"}, keys, labels)
	if it.Indicates != probes.Blocked || it.Data["run"] != "sess-7f3" || it.Data["policy_label"] != "acme.io/policy" {
		t.Errorf("platform labels: %+v", it)
	}
	labels["acme.io/task"] = ""
	delete(labels, "acme.io/policy")
	it = declaredIdentity(evidence.Item{Kind: "labels"}, keys, labels)
	if it.Indicates != probes.Escaped || !strings.Contains(it.Summary, "task (acme.io/task), policy (acme.io/policy)") {
		t.Errorf("missing labels: %+v", it)
	}
	it = declaredIdentity(evidence.Item{Kind: "labels"}, keys, map[string]string{"sandcheck.run": "r", "sandcheck.task": "t"})
	if it.Indicates != probes.Escaped {
		t.Errorf("the harness's labels stood in for the platform's: %+v", it)
	}
}
