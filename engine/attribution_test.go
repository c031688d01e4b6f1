package engine

import (
	"slices"
	"testing"
)

func TestLabelBinding(t *testing.T) {
	const run, target, task = "20261130t081928-d952e6b7", "hardened-reference", "shared"
	harnessOnly := map[string]string{"sandcheck.run": run, "sandcheck.target": target, "sandcheck.task": task, "org.opencontainers.image.title": "x"}
	missing, binding := labelBinding(harnessOnly, run, target, task)
	if !slices.Equal(missing, []string{"run", "target", "task"}) || len(binding) != 0 {
		t.Errorf("the harness's own labels must not count: missing %v, binding %v", missing, binding)
	}
	platform := map[string]string{"sandcheck.task": task, "platform.run": run, "platform.target": target, "platform.task": task}
	if missing, binding := labelBinding(platform, run, target, task); len(missing) != 0 || len(binding) != 3 {
		t.Errorf("missing %v, binding %v", missing, binding)
	}
	delete(platform, "platform.task")
	if missing, _ := labelBinding(platform, run, target, task); !slices.Equal(missing, []string{"task"}) {
		t.Errorf("missing %v, want [task]", missing)
	}
}
