package reports

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// finding is one failed or unconfirmed result, for the failures section.
type finding struct {
	r   evidence.Result
	st  state
	msg string
	eff probes.Outcome
}

// findings returns the record's failed and unconfirmed results, most
// severe first, failures before unconfirmed ones.
func findings(rec *evidence.Record) []finding {
	var out []finding
	for _, r := range rec.Results {
		st, msg, _ := classify(rec.Verdict, r)
		if st == stateFail || st == stateError {
			out = append(out, finding{r, st, msg, effective(rec.Verdict, r)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].st != out[j].st {
			return out[i].st == stateFail
		}
		return severityRank(severityOf(out[i].r)) < severityRank(severityOf(out[j].r))
	})
	return out
}

// criterionFindings are the reasons of failed or unconfirmed criteria that
// name no probe (a writable engine socket, a missing control), each once
// however many sandboxes showed it.
func criterionFindings(v *evidence.Verdict) []evidence.Criterion {
	if v == nil {
		return nil
	}
	var out []evidence.Criterion
	for _, c := range v.Criteria {
		if c.Status != evidence.StatusFail && c.Status != evidence.StatusUnconfirmed {
			continue
		}
		var rs []string
		for _, r := range c.Reasons {
			if _, ok := reasonProbe(r); ok {
				continue
			}
			// One line per finding, not one per sandbox it was seen in.
			if r = withoutSandbox(r); !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			out = append(out, evidence.Criterion{ID: c.ID, Status: c.Status, Reasons: rs})
		}
	}
	return out
}

// Evidence shown per finding in the summary; report.html has all of it.
const (
	maxSideItems      = 3
	maxCriterionLines = 5
)

// splitEvidence separates what the probe said from what the host saw.
func splitEvidence(r evidence.Result) (said, saw []evidence.Item) {
	for _, it := range r.Evidence {
		if it.Source == evidence.SourceProbe {
			said = append(said, it)
		} else {
			saw = append(saw, it)
		}
	}
	return said, saw
}

// remediation is the catalog's remediation of a probe ("" when the probe is
// not in this build's catalog).
func remediation(id string) string {
	if s, ok := probes.Lookup(id); ok {
		return s.Remediation
	}
	return ""
}

func mdFinding(f finding) []byte {
	var b bytes.Buffer
	r := f.r
	fmt.Fprintf(&b, "### %s %s · %s · %s, expected %s\n\n", statusWord(string(f.st)), code(r.Probe, false),
		code(severityOf(r), false), code(string(f.eff), false), code(string(r.Expected), false))
	if f.msg != "" {
		fmt.Fprintf(&b, "%s\n\n", code(f.msg, false))
	}
	said, saw := splitEvidence(r)
	if r.Detail != "" {
		said = append([]evidence.Item{{Source: evidence.SourceProbe, Kind: "detail", Summary: r.Detail}}, said...)
	}
	rows := min(max(len(said), len(saw)), maxSideItems)
	if rows > 0 {
		b.WriteString("| What the probe said | What the host saw |\n| --- | --- |\n")
		side := func(items []evidence.Item, i int) string {
			switch {
			case i < len(items):
				return cell(itemLine(items[i]))
			case i == 0:
				return "nothing"
			}
			return ""
		}
		for i := 0; i < rows; i++ {
			fmt.Fprintf(&b, "| %s | %s |\n", side(said, i), side(saw, i))
		}
		if more := len(said) + len(saw) - 2*rows; more > 0 && (len(said) > rows || len(saw) > rows) {
			fmt.Fprintf(&b, "\n%d more evidence item(s) in report.html.\n", max(len(said)-rows, 0)+max(len(saw)-rows, 0))
		}
		b.WriteString("\n")
	}
	if fix := remediation(r.Probe); fix != "" {
		fmt.Fprintf(&b, "**Fix:** %s\n\n", code(fix, false))
	}
	if keys := targetKeys(r.Probe, r.Criterion); len(keys) > 0 {
		fmt.Fprintf(&b, "Where: target key %s.\n\n", code(keys[0], false))
	}
	return b.Bytes()
}

func mdCriterionFinding(c evidence.Criterion) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "### %s criterion %s\n\n", statusWord(c.Status), code(c.ID, false))
	for i, r := range c.Reasons {
		if i == maxCriterionLines {
			fmt.Fprintf(&b, "- and %d more in run.json\n", len(c.Reasons)-i)
			break
		}
		fmt.Fprintf(&b, "- %s\n", code(r, false))
	}
	if keys := targetKeys("", c.ID); len(keys) > 0 {
		fmt.Fprintf(&b, "\nWhere: target key %s.\n", code(keys[0], false))
	}
	b.WriteString("\n")
	return b.Bytes()
}

// mdFailures writes the failures, most severe first, within budget bytes;
// those that do not fit are counted and, as far as room allows, named.
func mdFailures(b *bytes.Buffer, rec *evidence.Record, budget int) {
	fs := findings(rec)
	cs := criterionFindings(rec.Verdict)
	if len(fs) == 0 && len(cs) == 0 {
		return
	}
	start := b.Len()
	fmt.Fprintf(b, "## Failures first\n\n%d failed or unconfirmed result(s), %d criterion finding(s) naming no probe.\n\n", len(fs), len(cs))
	const reserve = 2000 // for the closing note and names
	var left []string
	for _, c := range cs {
		block := mdCriterionFinding(c)
		if b.Len()-start+len(block) > budget-reserve {
			left = append(left, "criterion "+c.ID)
			continue
		}
		b.Write(block)
	}
	for _, f := range fs {
		block := mdFinding(f)
		if b.Len()-start+len(block) > budget-reserve {
			left = append(left, f.r.Probe)
			continue
		}
		b.Write(block)
	}
	if len(left) == 0 {
		return
	}
	fmt.Fprintf(b, "%d more not shown here (the summary stays under %d characters); report.html and run.json have them all", len(left), MaxSummary)
	var names []string
	room := reserve - 200
	for _, n := range left {
		c := code(n, false)
		if room -= len(c) + 2; room < 0 {
			names = append(names, "…")
			break
		}
		names = append(names, c)
	}
	fmt.Fprintf(b, ": %s.\n\n", strings.Join(names, ", "))
}
