package engine

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/runners"
)

// exposure is the host's own fact beside a honeytoken check: which of the
// files the harness planted for the probe the runtime reports mounted into
// the box, and where. A probe that read none of them and says "blocked"
// proves nothing where the file is in the box (absence of a proof is not
// evidence): the policy then holds the claim unconfirmed
// (policies/rego/exposure.rego). The item indicates no outcome by itself: a
// mounted file may still be unreadable to the box's user.
//
// It compares host paths only (the runtime's mount sources against the
// paths the harness wrote), never looks inside the box, and reports at most
// a few files.
func (c *creds) exposure(probe string, v *runners.RuntimeView) (evidence.Item, bool) {
	if c == nil || v == nil {
		return evidence.Item{}, false
	}
	c.mu.Lock()
	var files []honeySecret
	for _, s := range c.secrets {
		if s.probe == probe && s.file != "" {
			files = append(files, s)
		}
	}
	c.mu.Unlock()
	seen := map[string]bool{}
	var in []string
	for _, s := range files {
		if seen[s.file] {
			continue
		}
		seen[s.file] = true
		if at, ro, ok := mountedAt(s.file, v.Mounts); ok {
			mode := "read-write"
			if ro {
				mode = "read-only"
			}
			in = append(in, fmt.Sprintf("%s at %s (%s)", s.what, at, mode))
		}
	}
	if len(in) == 0 {
		return evidence.Item{}, false
	}
	sort.Strings(in)
	return evidence.Item{Source: evidence.SourceRuntime, Kind: "honeytoken-exposed",
		Summary: truncate(fmt.Sprintf("the runtime mounts %d of the %d file(s) the harness planted for this probe into the box: %s", len(in), len(seen), strings.Join(in, "; ")), 300),
		Data:    map[string]string{"mounted": fmt.Sprint(len(in)), "planted": fmt.Sprint(len(seen))}}, true
}

// mountedAt reports where in the box the host file lands through a bind
// mount of itself or of a folder above it, as the runtime reports its
// mounts (the last matching mount wins, as it would shadow the others).
func mountedAt(file string, mounts []runners.Mount) (at string, readOnly, ok bool) {
	file = filepath.Clean(file)
	for _, m := range mounts {
		if m.Type != "" && m.Type != "bind" {
			continue
		}
		src := filepath.Clean(m.Source)
		if !filepath.IsAbs(src) || !filepath.IsAbs(m.Destination) {
			continue
		}
		rel, err := filepath.Rel(src, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		at, readOnly, ok = filepath.Join(m.Destination, rel), m.ReadOnly, true
	}
	return at, readOnly, ok
}
