package reports

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// confirmedMark follows a cell whose outcome the host confirmed.
const confirmedMark = "✓"

// confirmedLegend says what the marks of the matrix's cells mean.
const confirmedLegend = confirmedMark + ": the host confirmed the outcome (a canary's record, the tracer, the runtime's view, the kernel's tables, teardown checks); unmarked: the probe's word alone. An inconclusive cell stands only where the reference says why (below)."

// hostConfirmed reports whether a conclusive effective outcome rests on
// host evidence: an item of a host source that indicates that outcome.
// The probe's self-report never confirms itself.
func hostConfirmed(eff probes.Outcome, r evidence.Result) bool {
	if eff != probes.Escaped && eff != probes.Blocked {
		return false
	}
	for _, it := range r.Evidence {
		if it.Source != evidence.SourceProbe && it.Indicates == eff {
			return true
		}
	}
	return false
}

// cellMark is one cell of the matrix: the outcome, marked where the host
// confirmed it.
func cellMark(col CompareColumn, probe string) string {
	m := outcomeMark(col.Outcome[probe])
	if col.Confirmed[probe] {
		m += " " + confirmedMark
	}
	return m
}

// Count is how many of the column's cells have outcome o.
func (col CompareColumn) Count(o string) int { return col.count(probes.Outcome(o)) }

func (col CompareColumn) count(o probes.Outcome) int {
	n := 0
	for _, v := range col.Outcome {
		if probes.Outcome(v) == o {
			n++
		}
	}
	return n
}

// inconclusiveText is the inconclusive count of a column with how many of
// those its reference explains.
func inconclusiveText(col CompareColumn) string {
	return fmt.Sprintf("%d (%d)", col.count(probes.Inconclusive), len(col.Explained))
}

// explainedCell is one explained inconclusive cell.
type explainedCell struct{ Kind, Target, Probe, Why string }

// explainedCells lists every explained inconclusive cell, column by column.
func explainedCells(c Comparison) []explainedCell {
	var out []explainedCell
	for _, col := range c.Columns {
		var ids []string
		for p := range col.Explained {
			ids = append(ids, p)
		}
		sort.Strings(ids)
		for _, p := range ids {
			out = append(out, explainedCell{col.Kind, col.Target, p, col.Explained[p]})
		}
	}
	return out
}

// writeExplainedMarkdown writes the legend and the explained cells after
// the matrix.
func writeExplainedMarkdown(b *bytes.Buffer, c Comparison) {
	fmt.Fprintf(b, "\n%s\n", confirmedLegend)
	cells := explainedCells(c)
	if len(cells) == 0 {
		return
	}
	b.WriteString("\n## Explained inconclusive cells\n\n| Sandbox kind | Target | Probe | Why the runner cannot measure it |\n| --- | --- | --- | --- |\n")
	for _, e := range cells {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(e.Kind), cell(e.Target), cell(e.Probe), cell(e.Why))
	}
}
