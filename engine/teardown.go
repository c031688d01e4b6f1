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
// nothing and either saw the plant outside the box before close (sight,
// from seePlant; nil when it did not look) or its own view shows the box
// had no way to plant it outside itself (plant.go; the item's data names
// the precondition); no indication when nothing was found without such a
// marker (absence is not evidence) or when the host could not look.
func (e *Engine) teardownEvidence(ctx context.Context, spec probes.Spec, s *sandbox, sight *plantSight) []evidence.Item {
	kinds := teardownKinds(spec)
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
		items = append(items, residueItem(r, token, avenues[r.Kind], sight))
	}
	return items
}

// residueItem is the teardown item of one kind: what the check after close
// found (r), the ways the box had to plant that kind outside itself
// (avenues) and what the host saw of the plant before close (sight).
func residueItem(r runners.Residue, token string, avenues []string, sight *plantSight) evidence.Item {
	it := evidence.Item{Source: evidence.SourceTeardown, Kind: "teardown." + r.Kind, Data: map[string]string{"token": token}}
	switch {
	case r.Failed != "":
		it.Summary = "teardown check failed: " + r.Failed
	case len(r.Found) > 0:
		it.Indicates = probes.Escaped
		it.Summary = fmt.Sprintf("after close, %d thing(s) carrying the probe's token survived (removed by the harness): %s", len(r.Found), truncate(strings.Join(r.Found, "; "), 400))
		if sight != nil && sight.err == nil && len(sight.seen[r.Kind]) > 0 {
			it.Data["seen"] = truncate(strings.Join(sight.seen[r.Kind], "; "), 400)
		}
	case sight != nil && sight.err == nil && len(sight.seen[r.Kind]) > 0:
		// The host saw the plant outside the box before close and
		// finds it gone after: teardown removed it.
		it.Indicates = probes.Blocked
		it.Data["precondition"] = preconditionSeen
		it.Data["seen"] = truncate(strings.Join(sight.seen[r.Kind], "; "), 400)
		it.Summary = "before close the host saw the probe's " + r.Kind + " plant outside the box (" +
			truncate(strings.Join(sight.seen[r.Kind], "; "), 300) + "); after close nothing carrying the token was left in " + r.Checked
	case len(avenues) == 0:
		it.Indicates = probes.Blocked
		it.Data["precondition"] = preconditionNoAvenue
		it.Summary = "after close, nothing carrying the probe's token was left in " + r.Checked +
			"; the runtime's view shows no way to plant it outside the box (no engine socket, writable host folder or host privilege)"
	default:
		// The box could have planted something and the host saw no
		// plant: nothing found is what a probe that never tried leaves.
		it.Data["precondition"] = preconditionNone
		it.Data["avenues"] = truncate(strings.Join(avenues, "; "), 400)
		it.Summary = "after close, nothing carrying the probe's token was left in " + r.Checked +
			", but the host saw no " + r.Kind + " plant outside the box first" + sightFailed(sight) + " while the box could make one (" +
			truncate(strings.Join(avenues, "; "), 300) + "): absence is not evidence"
	}
	return it
}

// sightFailed says why the host's look before close saw nothing, where it
// could not look.
func sightFailed(sight *plantSight) string {
	switch {
	case sight == nil:
		return " (the host did not look before close)"
	case sight.err != nil:
		return " (its look before close failed: " + truncate(sight.err.Error(), 200) + ")"
	}
	return ""
}
