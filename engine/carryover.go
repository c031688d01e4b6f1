package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/moby/profiles/seccomp"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// Carry-over between tasks. A pair or sequence probe plants something in
// one task (a lingering process, scratch files, a key in the user keyring)
// and its check task, the next one the target hands out, looks for it.
// "Not found" is the box's word, and a probe that never planted finds
// nothing either: absence is not evidence. The host's own fact is where
// the check ran: the harness itself started the check task in a fresh
// sandbox (task launch, or a sequence probe's second box) after removing
// the plant's, so the plant meets it only through a way out of the first
// box the runtime's view would show (plantAvenues). With none, the item
// reads blocked with precondition "no-avenue"; a check in the very box the
// plant ran in (exec launch), or a box with an avenue, gives no indication
// and precondition "none", and the policy holds the probe's "blocked"
// unconfirmed.

// carryoverKinds says, for each runtime:carryover-<kind> host kind, what the plant
// is (for the summary).
var carryoverKinds = map[string]string{
	"processes": "lingering process",
	"scratch":   "file",
	"keyring":   "key",
}

// carryoverObserver is the observer of the runtime:carryover-<kind> host kinds.
func carryoverObserver(e *Engine, kind string, o observation) []evidence.Item {
	pidHost := e.target.Docker != nil && e.target.Docker.PID == "host"
	fresh := e.taskMode() || o.spec.Sandbox == probes.Sequence
	var check string
	if o.s != nil && o.s.sb != nil {
		check = o.s.sb.ID()
	}
	var view *runners.RuntimeView
	if o.s != nil {
		view = o.s.view
	}
	return []evidence.Item{carryoverFact(strings.TrimPrefix(kind, "runtime:carryover-"), fresh, check, view, pidHost, e.seccompProfile)}
}

// carryoverFact is the host's fact for one carry-over kind: fresh says the
// harness ran the check task in a sandbox started after the plant's was
// removed, check names it, v is its runtime view (the same target's, so the
// plant box's as well), pidHost the target's PID namespace setting and
// profile reads the target's own seccomp profile (for the keyring).
func carryoverFact(kind string, fresh bool, check string, v *runners.RuntimeView, pidHost bool, profile func() (*seccomp.Seccomp, error)) evidence.Item {
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: "carryover-" + kind, Data: map[string]string{}}
	what, known := carryoverKinds[kind]
	if !known {
		it.Data["precondition"] = preconditionNone
		it.Summary = fmt.Sprintf("the host knows no carry-over check of kind %q", kind)
		return it
	}
	if !fresh {
		it.Data["precondition"] = preconditionNone
		it.Summary = fmt.Sprintf("the check task ran in the sandbox the plant task left running (exec launch): a %s planted there meets it unless the box itself removed it, and the host saw no plant: not found is the probe's word only", what)
		return it
	}
	var avenues []string
	if kind == "keyring" {
		avenues = keyringAvenues(v, profile)
	} else {
		k := "processes"
		if kind == "scratch" {
			k = "scratch"
		}
		avenues = plantAvenues(v, pidHost, []string{k})[k]
	}
	if len(avenues) > 0 {
		it.Data["precondition"] = preconditionNone
		it.Data["avenues"] = truncate(strings.Join(avenues, "; "), 400)
		it.Summary = fmt.Sprintf("the check task ran in a fresh sandbox %s, but the plant's box could reach it with a %s (%s): not found is the probe's word only", shortName(check), what, truncate(strings.Join(avenues, "; "), 300))
		return it
	}
	it.Indicates = probes.Blocked
	it.Data["precondition"] = preconditionNoAvenue
	it.Summary = fmt.Sprintf("the check task ran in a fresh sandbox %s, started after the plant's was removed; the runtime's view shows no way for a %s to reach it from the plant's box (%s)", shortName(check), what, noAvenueWhy(kind))
	return it
}

// noAvenueWhy says what the host ruled out for a kind.
func noAvenueWhy(kind string) string {
	switch kind {
	case "scratch":
		return "no writable host folder or volume, no host privilege"
	case "keyring":
		return "its seccomp filter refuses add_key, or its kernel is its own"
	}
	return "no engine socket, host PID namespace or host privilege"
}

// keyringAvenues lists the ways a key added to the user keyring in one box
// meets the next box: kernel keyrings are not namespaced by containers, so
// any box on the host's kernel whose filter lets add_key through shares
// them by uid. gVisor's kernel is its own (the sentry's keyrings die with
// it). Without a filter that refuses add_key (the upstream default profile
// for "default", the target's own file for a custom one) that is an
// avenue; so is a filter the host cannot read.
func keyringAvenues(v *runners.RuntimeView, profile func() (*seccomp.Seccomp, error)) []string {
	if v == nil {
		return []string{"the host has no runtime view of the sandbox"}
	}
	if v.Runtime == "runsc" {
		return nil
	}
	if slices.Contains(v.Unknown, "seccomp") {
		return []string{"the runtime could not tell its seccomp profile"}
	}
	if v.Privileged {
		return []string{"privileged (no seccomp filter)"}
	}
	var p *seccomp.Seccomp
	switch v.Seccomp {
	case "unconfined", "":
		return []string{"seccomp " + map[bool]string{true: "not reported", false: "unconfined"}[v.Seccomp == ""] + ": add_key reaches the host's keyrings"}
	case "default":
		p = seccomp.DefaultProfile()
	default:
		var err error
		if p, err = profile(); err != nil {
			return []string{"the host cannot read the custom seccomp profile: " + err.Error()}
		}
	}
	if syscallAllowed(p, "add_key") {
		return []string{"the seccomp profile lets add_key through: a key reaches the host's keyring of its uid"}
	}
	return nil
}

// syscallAllowed reports whether a seccomp profile can let the named
// syscall through: a rule naming it with an action that runs it (whatever
// its argument conditions, includes or excludes), or no rule naming it
// and a default action that runs it. Read conservatively: a call that
// some condition allows counts as allowed.
func syscallAllowed(p *seccomp.Seccomp, name string) bool {
	runs := func(a string) bool {
		switch strings.ToUpper(a) {
		case "SCMP_ACT_ALLOW", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_NOTIFY":
			return true
		}
		return false
	}
	named := false
	for _, s := range p.Syscalls {
		if s == nil || !(slices.Contains(s.Names, name) || s.Name == name) {
			continue
		}
		named = true
		if runs(string(s.Action)) {
			return true
		}
	}
	return !named && runs(string(p.DefaultAction))
}

// maxSeccompProfile bounds the target's seccomp profile the host reads.
const maxSeccompProfile = 1 << 20

// seccompProfile reads the target's own seccomp profile file (the filter
// the harness started its sandboxes with), strictly.
func (e *Engine) seccompProfile() (*seccomp.Seccomp, error) {
	path := e.target.SeccompPath()
	if path == "" || path == "default" || path == "unconfined" {
		return nil, fmt.Errorf("the target names no seccomp profile file (%q)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSeccompProfile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading seccomp profile %s: %w", path, err)
	case len(b) > maxSeccompProfile:
		return nil, fmt.Errorf("reading seccomp profile %s: larger than %d bytes", path, maxSeccompProfile)
	}
	var p seccomp.Seccomp
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parsing seccomp profile %s: %w", path, err)
	}
	return &p, nil
}

// shortName shortens a sandbox ID for a summary.
func shortName(id string) string {
	if id == "" {
		return "(unnamed)"
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
