package targets

import (
	"strings"
	"testing"
	"time"
)

// The task keys are read from tasks: for every runner, with the docker
// and bwrap sections' keys as aliases; a key given in both places must
// agree, and a bad value names its field.
func TestTasksKeys(t *testing.T) {
	docker := "docker:\n  runtime: runc\n  network: none\n"
	bwrap := "runner: bwrap\nprofile: high-risk-code\nbwrap:\n  host_user: \"65534\"\n  unshare: [user, net]\n  network: none\n  tmpfs: [{path: /tmp, size: 1Mi}]\n"
	for _, c := range []struct {
		name, doc            string
		launch, agent        string
		budget               time.Duration
		wantErr, errContains string
	}{
		{name: "defaults", doc: inputsHead + docker, launch: "exec", agent: "root"},
		{name: "tasks section", doc: inputsHead + docker + "tasks: {launch: task, agent: none, cpu_time: 3s}\n", launch: "task", agent: "none", budget: 3 * time.Second},
		{name: "docker aliases", doc: inputsHead + docker + "  launch: task\n  agent: none\n  cpu_time: 2s\n", launch: "task", agent: "none", budget: 2 * time.Second},
		{name: "agreeing", doc: inputsHead + docker + "  launch: task\ntasks: {launch: task}\n", launch: "task", agent: "root"},
		{name: "disagreeing", doc: inputsHead + docker + "  launch: exec\ntasks: {launch: task}\n", errContains: "$.tasks.launch"},
		{name: "bad agent", doc: inputsHead + docker + "tasks: {agent: sometimes}\n", errContains: "$.tasks.agent"},
		{name: "bad budget", doc: inputsHead + docker + "tasks: {cpu_time: 2h}\n", errContains: "$.tasks.cpu_time"},
		{name: "bwrap alias", doc: "schema: sandcheck.dev/target/v1\nname: b\n" + bwrap + "  launch: task\n", launch: "task", agent: "root"},
		{name: "bwrap tasks", doc: "schema: sandcheck.dev/target/v1\nname: b\n" + bwrap + "tasks: {launch: task, agent: none, cpu_time: 3s}\n", launch: "task", agent: "none", budget: 3 * time.Second},
	} {
		tg, err := Parse("t.yaml", []byte(c.doc))
		if c.errContains != "" {
			if err == nil || !strings.Contains(err.Error(), c.errContains) {
				t.Errorf("%s: %v, want an error naming %s", c.name, err, c.errContains)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if tg.LaunchMode() != c.launch || tg.AgentMode() != c.agent || tg.CPUBudget() != c.budget {
			t.Errorf("%s: launch %q agent %q budget %s, want %q %q %s", c.name, tg.LaunchMode(), tg.AgentMode(), tg.CPUBudget(), c.launch, c.agent, c.budget)
		}
	}
}
