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
// carry its identities: the run, task and policy identities through the
// labels the target declares (attribution:), or without that declaration
// labels naming sandcheck's run and task (the run names its target: a label
// naming the target as well is reported, not required). Escaped means the
// sandbox cannot be tied to its run from the runtime's records.
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
		if keys := e.target.Attribution.Keys(); keys != nil {
			return declaredIdentity(it, keys, v.Labels)
		}
		missing, binding := labelBinding(v.Labels, e.rec.RunID, e.target.Name, v.Labels["sandcheck.task"])
		it.Summary = fmt.Sprintf("labels naming the run, target or task: %s", truncate(strings.Join(binding, ", "), 300))
		if len(binding) == 0 {
			it.Summary = "no label besides the harness's own sandcheck.* labels names the run, the target or the task"
		}
		if len(missing) == 0 {
			it.Summary += ": they name the run and the task"
			it.Indicates = probes.Blocked
		} else {
			it.Summary += "; no label names the " + strings.Join(missing, ", the ") +
				" (a platform that names them in its own vocabulary declares its labels with the target's attribution: key)"
			it.Indicates = probes.Escaped
		}
	}
	return it
}

// labelBinding lists what of the run and the task no platform label value
// names, and the platform labels that name the run, the target or the task,
// as key=value.
func labelBinding(labels map[string]string, runID, target, task string) (missing, binding []string) {
	want := []struct {
		what, value string
		required    bool
	}{{"run", runID, true}, {"target", target, false}, {"task", task, true}}
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
		if w.required && !found[i] {
			missing = append(missing, w.what)
		}
	}
	return missing, binding
}

// attributionOrder is the order identities are reported in.
var attributionOrder = []string{"run", "task", "policy"}

// declaredIdentity grades a sandbox's labels against the platform's own
// identity labels the target declares: each of run, task and policy must be
// there and not empty. The values are the platform's, not sandcheck's: a
// platform names its runs in its own vocabulary.
func declaredIdentity(it evidence.Item, keys, labels map[string]string) evidence.Item {
	it.Data = map[string]string{}
	var have, missing []string
	for _, what := range attributionOrder {
		k := keys[what]
		val := strings.TrimSpace(labels[k])
		if val == "" {
			missing = append(missing, fmt.Sprintf("%s (%s)", what, k))
			continue
		}
		it.Data[what] = truncate(val, 200)
		it.Data[what+"_label"] = k
		have = append(have, fmt.Sprintf("%s %s=%s", what, k, truncate(val, 100)))
	}
	if len(missing) == 0 {
		it.Summary = "the platform's labels carry the sandbox's identities: " + strings.Join(have, ", ")
		it.Indicates = probes.Blocked
		return it
	}
	it.Summary = "the sandbox lacks the platform's identity labels the target declares: " + strings.Join(missing, ", ")
	if len(have) > 0 {
		it.Summary += "; it has " + strings.Join(have, ", ")
	}
	it.Indicates = probes.Escaped
	return it
}
