package targets

import (
	"slices"
	"time"
)

// Tasks is how the platform hands work to its sandboxes, whatever runner
// starts them. A runner section may carry the same keys (docker's launch,
// agent and cpu_time; bwrap's launch), read when tasks: does not give them
// (a value in both places must agree).
type Tasks struct {
	// Launch is how the platform hands work to a sandbox: "exec" (one
	// long-lived sandbox per session, each task run in it; the default)
	// or "task" (each task is the first process of a fresh sandbox).
	Launch string `yaml:"launch,omitempty"`
	// Agent says whether the platform keeps an agent process in each
	// sandbox: "root" (a root agent holding the platform's key beside the
	// task; the default) or "none".
	Agent string `yaml:"agent,omitempty"`
	// CPUTime is the CPU time budget of one task, e.g. 3s: the platform's
	// watchdog, played by the harness through the sandbox cgroup's CPU
	// accounting, kills the task's sandbox once it is spent ("": none).
	CPUTime string `yaml:"cpu_time,omitempty"`
}

// LaunchMode is how the target hands out tasks: "exec" or "task"
// (tasks.launch, else the runner section's launch key).
func (t *Target) LaunchMode() string {
	if v := t.taskValue(func(x *Tasks) string { return x.Launch }); v != "" {
		return v
	}
	return "exec"
}

// AgentMode is whether the platform keeps an agent in each sandbox:
// "root" or "none" (tasks.agent, else docker.agent).
func (t *Target) AgentMode() string {
	if v := t.taskValue(func(x *Tasks) string { return x.Agent }); v != "" {
		return v
	}
	return "root"
}

// CPUBudget is the declared CPU time budget of one task (0: none;
// tasks.cpu_time, else docker.cpu_time).
func (t *Target) CPUBudget() time.Duration {
	v := t.taskValue(func(x *Tasks) string { return x.CPUTime })
	if v == "" {
		return 0
	}
	b, err := time.ParseDuration(v)
	if err != nil {
		return 0
	}
	return b
}

// taskValue is one key of tasks:, else of the runner sections that also
// carry it.
func (t *Target) taskValue(key func(*Tasks) string) string {
	if t.Tasks != nil {
		if v := key(t.Tasks); v != "" {
			return v
		}
	}
	for _, alias := range t.taskAliases() {
		if v := key(&alias.tasks); v != "" {
			return v
		}
	}
	return ""
}

// taskAlias is the task keys one runner section carries.
type taskAlias struct {
	path  string
	tasks Tasks
}

func (t *Target) taskAliases() []taskAlias {
	d := t.Declared()
	if d.Tasks == (Tasks{}) {
		return nil
	}
	return []taskAlias{{t.sectionPath(), d.Tasks}}
}

// sectionPath is the YAML path of the target's runner section.
func (t *Target) sectionPath() string {
	switch {
	case t.Section != nil:
		return "$." + t.Runner
	case t.Docker != nil:
		return "$.docker"
	}
	return "$." + t.Runner
}

// checkTasks checks tasks: and that a key given both there and in a
// runner section says the same in both.
func (v *validator) checkTasks(t *Target) {
	if t.Tasks == nil {
		return
	}
	x := t.Tasks
	oneOf := func(path, val string, allowed ...string) {
		if val != "" && !slices.Contains(allowed, val) {
			v.add(path, "%q is not one of %v", val, allowed)
		}
	}
	oneOf("$.tasks.launch", x.Launch, "exec", "task")
	oneOf("$.tasks.agent", x.Agent, "root", "none")
	if x.CPUTime != "" {
		if b, err := time.ParseDuration(x.CPUTime); err != nil || b < 100*time.Millisecond || b > time.Hour {
			v.add("$.tasks.cpu_time", "must be a duration from 100ms to 1h such as 2s (got %q)", x.CPUTime)
		}
	}
	for _, a := range t.taskAliases() {
		for _, k := range []struct{ key, tasks, alias string }{
			{"launch", x.Launch, a.tasks.Launch}, {"agent", x.Agent, a.tasks.Agent}, {"cpu_time", x.CPUTime, a.tasks.CPUTime},
		} {
			if k.tasks != "" && k.alias != "" && k.tasks != k.alias {
				v.add("$.tasks."+k.key, "%q disagrees with %s.%s %q; give it in one place", k.tasks, a.path, k.key, k.alias)
			}
		}
	}
}
