package main

import (
	"slices"
	"testing"
)

// TestCauseKeepsQuotedWords: a box's or a wrapper's words quoted in an
// error (%q) stay whole in the cause, whatever ": " they hold; the chain
// outside quotes splits as before.
func TestCauseKeepsQuotedWords(t *testing.T) {
	msg := `starting sandbox a: sandbox did not start: the wrapper did not run the command: sh printed "ready: go \"now: x\"" in stdout`
	if got, want := splitChain(msg), []string{"starting sandbox a", "sandbox did not start", "the wrapper did not run the command", `sh printed "ready: go \"now: x\"" in stdout`}; !slices.Equal(got, want) {
		t.Errorf("splitChain: %q, want %q", got, want)
	}
	if got, want := cause(msg), `sandbox did not start: the wrapper did not run the command: sh printed "ready: go \"now: x\"" in stdout`; got != want {
		t.Errorf("cause: %q, want %q", got, want)
	}
	if got := cause("a: b"); got != "a: b" {
		t.Errorf("cause of a short chain: %q", got)
	}
}
