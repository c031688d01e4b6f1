package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// teardownEvidence asks the runner, once the probe's sandbox is closed, for
// what the probe planted to outlive it (the spec's teardown:<kind> host
// evidence), by the token the probe ran with. Each kind gives one item:
// escaped when something survived; blocked when the host looked, found
// nothing and its own view shows the box had no way to plant it outside
// itself (plant.go; the item's data names the precondition);
// no indication when nothing was found without such a marker (absence is
// not evidence) or when the host could not look.
func (e *Engine) teardownEvidence(ctx context.Context, spec probes.Spec, s *sandbox) []evidence.Item {
	var kinds []string
	for _, h := range spec.Host {
		if k, ok := strings.CutPrefix(h, "teardown:"); ok {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	e.mu.Lock()
	token := s.tokens[spec.ID]
	e.mu.Unlock()
	unchecked := func(why string) []evidence.Item {
		items := make([]evidence.Item, len(kinds))
		for i, k := range kinds {
			items[i] = evidence.Item{Source: evidence.SourceTeardown, Kind: "teardown." + k, Summary: "teardown check failed: " + why}
		}
		return items
	}
	rf, ok := s.sb.(runners.ResidueFinder)
	switch {
	case token == "":
		return unchecked("the probe's token is unknown")
	case !ok:
		return unchecked(fmt.Sprintf("runner %s cannot look for residue", e.runner.Name()))
	}
	found, err := rf.FindResidue(ctx, token, kinds)
	if err != nil {
		e.harnessError(fmt.Errorf("probe %s: teardown check: %w", spec.ID, err))
		return unchecked(err.Error())
	}
	pidHost := e.target.Docker != nil && e.target.Docker.PID == "host"
	avenues := plantAvenues(s.view, pidHost, kinds)
	items := make([]evidence.Item, 0, len(found))
	for _, r := range found {
		it := evidence.Item{Source: evidence.SourceTeardown, Kind: "teardown." + r.Kind, Data: map[string]string{"token": token}}
		switch {
		case r.Failed != "":
			it.Summary = "teardown check failed: " + r.Failed
		case len(r.Found) > 0:
			it.Indicates = probes.Escaped
			it.Summary = fmt.Sprintf("after close, %d thing(s) carrying the probe's token survived (removed by the harness): %s", len(r.Found), truncate(strings.Join(r.Found, "; "), 400))
		case len(avenues[r.Kind]) == 0:
			it.Indicates = probes.Blocked
			it.Data["precondition"] = preconditionNoAvenue
			it.Summary = "after close, nothing carrying the probe's token was left in " + r.Checked +
				"; the runtime's view shows no way to plant it outside the box (no engine socket, writable host folder or host privilege)"
		default:
			// The box could have planted something and the host saw no
			// plant: nothing found is what a probe that never tried leaves.
			it.Data["precondition"] = preconditionNone
			it.Data["avenues"] = truncate(strings.Join(avenues[r.Kind], "; "), 400)
			it.Summary = "after close, nothing carrying the probe's token was left in " + r.Checked +
				", but the host saw no " + r.Kind + " plant first while the box could make one (" +
				truncate(strings.Join(avenues[r.Kind], "; "), 300) + "): absence is not evidence"
		}
		items = append(items, it)
	}
	return items
}
