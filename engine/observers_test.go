package engine

import (
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// The engine observes exactly the host-evidence vocabulary the catalog is
// checked against: a kind without an observer, or an observer of a kind
// the catalog may not name, is a mismatch.
func TestObserversMatchVocabulary(t *testing.T) {
	var have []string
	for k := range observers {
		have = append(have, k)
	}
	slices.Sort(have)
	if want := probes.HostKinds(); !slices.Equal(have, want) {
		t.Errorf("observers %v\nvocabulary %v", have, want)
	}
	for _, s := range probes.Catalog() {
		for _, h := range s.Host {
			if _, ok := observers[h]; !ok {
				t.Errorf("%s: host evidence %s has no observer", s.ID, h)
			}
		}
	}
}
