package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
)

// Markdown writes the summary a CI job posts: the verdict, each criterion
// with its status and reasons, every result, and timing. Every string from
// the record is rendered as a code span (see code), so hostile text cannot
// inject markup, links or mentions.
type Markdown struct{}

var _ Writer = Markdown{}

// Format returns "markdown".
func (Markdown) Format() string { return "markdown" }

// Write writes the Markdown summary of rec.
func (Markdown) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing markdown: record is nil")
	}
	var b bytes.Buffer
	mdHeader(&b, rec)
	mdCriteria(&b, rec.Verdict)
	mdWaivers(&b, rec.Verdict)
	mdResults(&b, rec)
	mdOutputs(&b, rec)
	mdTiming(&b, rec)
	mdErrors(&b, rec.Errors)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing markdown: %w", err)
	}
	return nil
}

func mdHeader(b *bytes.Buffer, rec *evidence.Record) {
	b.WriteString("# sandcheck run\n\n")
	b.WriteString(verdictLine(rec.Verdict) + "\n\n")
	row := func(k string, vs ...string) {
		var parts []string
		for _, v := range vs {
			if c := code(v, false); c != "" {
				parts = append(parts, c)
			}
		}
		fmt.Fprintf(b, "- %s: %s\n", k, strings.Join(parts, " "))
	}
	row("Run", rec.RunID)
	row("Target", rec.Target.Name, rec.Target.Path)
	row("Profile", rec.Target.Profile)
	row("Runner", rec.Runner, rec.Runtime)
	row("Image", rec.Image.Ref, rec.Image.Digest)
	row("Host kernel", rec.Host.Kernel)
	row("sandcheck", rec.Tool.Version)
	row("Policy", rec.Tool.PolicyVersion)
	b.WriteString("\n")
}

func verdictLine(v *evidence.Verdict) string {
	if v == nil {
		return "**Verdict: NOT GRADED** (the record carries no verdict)"
	}
	n := map[string]int{}
	for _, c := range v.Criteria {
		n[c.Status]++
	}
	word := "FAIL"
	if v.Pass {
		word = "PASS"
	}
	line := fmt.Sprintf("**Verdict: %s** (%d criteria: %d pass, %d fail, %d unconfirmed, %d not tested",
		word, len(v.Criteria), n[evidence.StatusPass], n[evidence.StatusFail],
		n[evidence.StatusUnconfirmed], n[evidence.StatusNotTested])
	if n[evidence.StatusWaived] > 0 {
		line += fmt.Sprintf(", %d waived", n[evidence.StatusWaived])
	}
	if len(v.Warnings) > 0 {
		line += fmt.Sprintf("; %d warnings", len(v.Warnings))
	}
	return line + ")"
}

// statusWord shows a status; fail and unconfirmed stand out.
func statusWord(s string) string {
	switch s {
	case evidence.StatusFail: // also stateFail
		return "**fail**"
	case evidence.StatusUnconfirmed:
		return "**unconfirmed**"
	case string(stateError):
		return "**error**"
	case evidence.StatusPass, evidence.StatusNotTested, evidence.StatusWaived, string(statePass), string(stateSkipped):
		return s
	}
	return cell(s)
}

func mdCriteria(b *bytes.Buffer, v *evidence.Verdict) {
	if v == nil {
		return
	}
	b.WriteString("## Criteria\n\n| Criterion | Status | Reasons |\n| --- | --- | --- |\n")
	for _, c := range v.Criteria {
		var rs []string
		for _, r := range c.Reasons {
			rs = append(rs, cell(r))
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", cell(c.ID), statusWord(c.Status), strings.Join(rs, "<br>"))
	}
	b.WriteString("\n")
}

// mdWaivers lists every applied and expired waiver and the warnings, so the
// accepted residual risk is in the summary, not only in run.json.
func mdWaivers(b *bytes.Buffer, v *evidence.Verdict) {
	if v == nil {
		return
	}
	table := func(title string, ws []evidence.WaiverUse) {
		if len(ws) == 0 {
			return
		}
		fmt.Fprintf(b, "## %s\n\n| Waiver | Criterion | Probe | Target | Owner | Expires | Reason | Waived |\n| --- | --- | --- | --- | --- | --- | --- | ---: |\n", title)
		for _, w := range ws {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", cell(w.ID), cell(w.Criterion), cell(w.Probe),
				cell(w.Target), cell(w.Owner), cell(w.Expires), cell(w.Reason), len(w.Waived))
		}
		b.WriteString("\n")
	}
	table("Applied waivers", v.Waivers)
	table("Expired waivers (no longer applied)", v.ExpiredWaivers)
	if len(v.Warnings) > 0 {
		b.WriteString("## Warnings\n\n")
		for _, w := range v.Warnings {
			fmt.Fprintf(b, "- %s\n", code(w, false))
		}
		b.WriteString("\n")
	}
}

func mdResults(b *bytes.Buffer, rec *evidence.Record) {
	n := map[state]int{}
	var rows bytes.Buffer
	for _, r := range rec.Results {
		st, _, _ := classify(rec.Verdict, r)
		n[st]++
		var items []string
		for _, it := range r.Evidence {
			items = append(items, cell(itemLine(it)))
		}
		fmt.Fprintf(&rows, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n",
			cell(r.Probe), cell(r.Criterion), cell(r.Severity), cell(string(r.Expected)),
			cell(string(r.Outcome)), cell(string(effective(rec.Verdict, r))), statusWord(string(st)),
			cell(r.Detail), strings.Join(items, "<br>"), r.Seconds)
	}
	fmt.Fprintf(b, "## Results\n\n%d results: %d ok, %d fail, %d error, %d skipped.\n\n",
		len(rec.Results), n[statePass], n[stateFail], n[stateError], n[stateSkipped])
	if len(rec.Results) == 0 {
		return
	}
	b.WriteString("<details><summary>All results</summary>\n\n")
	b.WriteString("| Probe | Criterion | Severity | Expected | Reported | Effective | Status | Detail | Evidence | Seconds |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: |\n")
	b.Write(rows.Bytes())
	b.WriteString("\n</details>\n\n")
}

func mdTiming(b *bytes.Buffer, rec *evidence.Record) {
	t := rec.Timing
	b.WriteString("## Timing\n\n| Total | Sandbox start | Probes | Started | Finished |\n| ---: | ---: | ---: | --- | --- |\n")
	fmt.Fprintf(b, "| %.1fs | %.1fs | %.1fs | %s | %s |\n\n",
		t.TotalSeconds, t.SandboxStartSeconds, t.ProbeSeconds, stamp(rec.StartedAt), stamp(rec.FinishedAt))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func mdErrors(b *bytes.Buffer, errs []string) {
	if len(errs) == 0 {
		return
	}
	b.WriteString("## Harness errors\n\n")
	for _, e := range errs {
		fmt.Fprintf(b, "- %s\n", code(e, false))
	}
	b.WriteString("\n")
}
