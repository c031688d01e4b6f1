// Package probes declares the probe catalog (each probe's spec as data) and the
// result a probe reports from inside a sandbox.
//
// The catalog is the single source of truth: the Ginkgo suites build one spec per
// entry, the probe binary registers one implementation per entry, and the human
// documentation is generated from it.
package probes

// Outcome is what one probe reports about one abuse attempt. Only Blocked and
// Escaped are conclusive; Inconclusive is never a pass.
type Outcome string

// The four outcomes a probe can report.
const (
	// Blocked: the sandbox stopped the attempt.
	Blocked Outcome = "blocked"
	// Escaped: the attempt succeeded; the sandbox let it through.
	Escaped Outcome = "escaped"
	// Inconclusive: the probe could not tell (an unexpected error, a timeout).
	Inconclusive Outcome = "inconclusive"
	// NotApplicable: the attempt makes no sense in this sandbox (e.g. no network
	// interface to test, an architecture without the syscall).
	NotApplicable Outcome = "not-applicable"
)

// Valid reports whether o is one of the four outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case Blocked, Escaped, Inconclusive, NotApplicable:
		return true
	}
	return false
}

// Conclusive reports whether o settles the question (blocked or escaped).
func (o Outcome) Conclusive() bool { return o == Blocked || o == Escaped }

// NotTested is set by the harness, never reported by a probe: the runner
// lacks what the probe needs (Spec.Requires), so it did not run. It is
// never a pass.
const NotTested Outcome = "not-tested"
