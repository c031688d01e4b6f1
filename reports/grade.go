package reports

import (
	"fmt"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// The reports do not grade. They show the verdict the policy wrote and, per
// result, which of its reasons are about that result; effective repeats the
// policy's one ranking rule so a result can be shown even without a verdict.

// state is how one result is shown: the JUnit element it becomes and the
// word the Markdown table uses.
type state string

const (
	statePass    state = "ok"
	stateFail    state = "fail"
	stateError   state = "error"
	stateSkipped state = "skipped"
	// stateNotTested: the runner could not test the probe; counted and
	// shown, never a pass.
	stateNotTested state = "not-tested"
)

// outcomeNotTested is the outcome the engine gives a probe the runner cannot
// test (with the reason as detail).
const outcomeNotTested probes.Outcome = "not-tested"

// effective is the outcome after host evidence, as the verdict's per-result
// grades give it; without a verdict, an item from any source but the probe
// that indicates escaped outranks the self-report (the policy's main rule).
func effective(v *evidence.Verdict, r evidence.Result) probes.Outcome {
	if v != nil {
		for _, g := range v.Results {
			if g.Probe == r.Probe {
				return g.Effective
			}
		}
	}
	for _, it := range r.Evidence {
		if it.Source != evidence.SourceProbe && it.Indicates == probes.Escaped {
			return probes.Escaped
		}
	}
	return r.Outcome
}

// citation is a verdict reason about one result.
type citation struct {
	status string // of the criterion the reason belongs to
	reason string
}

// citations returns the verdict's reasons about probe id from failed,
// unconfirmed or waived criteria. The policy starts every such reason with
// "probe <id> ".
func citations(v *evidence.Verdict, id string) []citation {
	if v == nil {
		return nil
	}
	prefix := "probe " + id + " "
	var out []citation
	for _, c := range v.Criteria {
		if c.Status != evidence.StatusFail && c.Status != evidence.StatusUnconfirmed && c.Status != evidence.StatusWaived {
			continue
		}
		for _, r := range c.Reasons {
			if strings.HasPrefix(r, prefix) {
				out = append(out, citation{c.Status, r})
			}
		}
	}
	return out
}

// classify decides how a result is shown and the one-line message why.
func classify(v *evidence.Verdict, r evidence.Result) (state, string, []citation) {
	eff := effective(v, r)
	cites := citations(v, r.Probe)
	first := func(status string) (string, bool) {
		for _, c := range cites {
			if status == "" || c.status == status {
				return c.reason, true
			}
		}
		return "", false
	}
	if eff == probes.Inconclusive {
		msg, ok := first("")
		if !ok {
			msg = "inconclusive: " + orNone(r.Detail)
		}
		return stateError, msg, cites
	}
	if msg, ok := first(evidence.StatusFail); ok {
		return stateFail, msg, cites
	}
	if eff == outcomeNotTested {
		return stateNotTested, "not tested: " + orNone(r.Detail), cites
	}
	// A waived finding is accepted residual risk: shown, not failed.
	if msg, ok := first(evidence.StatusWaived); ok {
		return stateSkipped, msg, cites
	}
	if eff.Conclusive() && eff != r.Expected {
		return stateFail, fmt.Sprintf("%s (expected %s)", eff, r.Expected), cites
	}
	if msg, ok := first(evidence.StatusUnconfirmed); ok {
		return stateError, msg, cites
	}
	if eff == evidence.Unconfirmed {
		// The policy's own reading: a blocked no host check confirmed.
		return stateError, "unconfirmed: no host check confirmed the probe's blocked", cites
	}
	switch {
	case eff == probes.NotApplicable:
		return stateSkipped, "not applicable: " + orNone(r.Detail), cites
	case !eff.Valid():
		return stateError, fmt.Sprintf("unknown outcome %q", string(eff)), cites
	}
	return statePass, "", cites
}

func orNone(s string) string {
	if s == "" {
		return "no detail"
	}
	return s
}

// itemLine describes one evidence item on one line.
func itemLine(it evidence.Item) string {
	ind := string(it.Indicates)
	if ind == "" {
		ind = "informs"
	}
	return fmt.Sprintf("%s/%s (%s): %s", it.Source, it.Kind, ind, it.Summary)
}
