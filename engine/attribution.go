package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// identityFact grades the identity the runtime gave a sandbox, as the host
// sees it: its host name must carry the run ID, and the platform's own labels
// (not the harness's sandcheck.* ones, which it adds to every sandbox) must
// name the run, the target and the task. Escaped means the sandbox cannot be
// tied to its run from the runtime's records.
func (e *Engine) identityFact(fact string, v *runners.RuntimeView) evidence.Item {
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: fact}
	switch fact {
	case "hostname":
		it.Summary = fmt.Sprintf("host name %q", v.Hostname)
		it.Data = map[string]string{"hostname": v.Hostname, "run_id": e.rec.RunID}
		if v.Hostname != "" && strings.Contains(v.Hostname, e.rec.RunID) {
			it.Summary += " carries the run ID"
			it.Indicates = probes.Blocked
		} else {
			it.Summary += " does not carry the run ID " + e.rec.RunID
			it.Indicates = probes.Escaped
		}
	case "labels":
		missing, binding := labelBinding(v.Labels, e.rec.RunID, e.target.Name, v.Labels["sandcheck.task"])
		it.Summary = fmt.Sprintf("labels naming the run, target or task: %s", truncate(strings.Join(binding, ", "), 300))
		if len(binding) == 0 {
			it.Summary = "no label besides the harness's own sandcheck.* labels names the run, the target or the task"
		}
		if len(missing) == 0 {
			it.Summary += ": they name the run, the target and the task"
			it.Indicates = probes.Blocked
		} else {
			it.Summary += "; no label names the " + strings.Join(missing, ", the ")
			it.Indicates = probes.Escaped
		}
	}
	return it
}

// labelBinding lists what of run, target and task no platform label value
// names, and the platform labels that name one of them, as key=value.
func labelBinding(labels map[string]string, runID, target, task string) (missing, binding []string) {
	want := []struct{ what, value string }{{"run", runID}, {"target", target}, {"task", task}}
	found := make([]bool, len(want))
	for k, val := range labels {
		if strings.HasPrefix(k, "sandcheck.") {
			continue
		}
		binds := false
		for i, w := range want {
			if w.value != "" && strings.Contains(val, w.value) {
				found[i], binds = true, true
			}
		}
		if binds {
			binding = append(binding, k+"="+val)
		}
	}
	sort.Strings(binding)
	for i, w := range want {
		if !found[i] {
			missing = append(missing, w.what)
		}
	}
	return missing, binding
}
