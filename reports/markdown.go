package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// MaxSummary bounds summary.md in bytes (so in characters too), below the
// 65,536 characters GitHub accepts in a pull-request comment or a step
// summary, whatever the run.
const MaxSummary = 60000

// Markdown writes the summary a CI job posts, at most MaxSummary bytes for
// any run: the verdict, totals by severity, the failures first with their
// evidence (what the probe said beside what the host saw) and remediation,
// the criteria (passing ones as counts), the residual risks, waivers,
// timing. Failures that do not fit are counted and named; report.html and
// run.json have everything. Every string from the record is rendered as a
// code span (see code), so hostile text cannot inject markup, links or
// mentions.
type Markdown struct{}

var _ Writer = Markdown{}

// Format returns "markdown".
func (Markdown) Format() string { return "markdown" }

// Write writes the Markdown summary of rec.
func (Markdown) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing markdown: record is nil")
	}
	var head, tail bytes.Buffer
	mdHeader(&head, rec)
	mdSeverities(&head, rec)
	mdCriteria(&tail, rec.Verdict)
	mdRisks(&tail, rec)
	mdWaivers(&tail, rec.Verdict)
	mdResultCounts(&tail, rec)
	mdOutputs(&tail, rec)
	mdTiming(&tail, rec)
	mdErrors(&tail, rec.Errors)
	var b bytes.Buffer
	b.Write(head.Bytes())
	mdFailures(&b, rec, MaxSummary-head.Len()-tail.Len())
	b.Write(tail.Bytes())
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
	if p := rec.Provenance; p != nil {
		// What the supply-chain check verified before anything started.
		sig := "signature not verified: " + plain(p.Signature.Error)
		if p.Signature.Verified {
			sig = "signature verified with key " + code(p.Signature.KeyFingerprint, false)
		}
		fmt.Fprintf(b, "- Provenance: pinned %t, %s; %s\n", p.Pinned, sig, plain(p.Signature.Tlog))
		if p.SBOM != nil {
			row("SBOM", p.SBOM.Path, p.SBOM.Format, p.SBOM.Digest)
		}
	}
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

// severityRank orders severities, most severe first; unknown ones last.
func severityRank(s string) int {
	for i, v := range probes.Severities {
		if v == s {
			return i
		}
	}
	return len(probes.Severities)
}

// shownStates are the result states a summary counts, in column order.
var shownStates = []state{stateFail, stateError, stateNotTested, stateSkipped, statePass}

// mdSeverities counts results by severity and how they are shown.
func mdSeverities(b *bytes.Buffer, rec *evidence.Record) {
	if len(rec.Results) == 0 {
		return
	}
	counts := map[string]map[state]int{}
	var sevs []string
	for _, r := range rec.Results {
		st, _, _ := classify(rec.Verdict, r)
		sev := severityOf(r)
		if counts[sev] == nil {
			counts[sev] = map[state]int{}
			sevs = append(sevs, sev)
		}
		counts[sev][st]++
	}
	sort.Slice(sevs, func(i, j int) bool {
		if a, b := severityRank(sevs[i]), severityRank(sevs[j]); a != b {
			return a < b
		}
		return sevs[i] < sevs[j]
	})
	b.WriteString("## Totals by severity\n\n| Severity | Failed | Unconfirmed | Not tested | Skipped (n/a, waived) | Held |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range sevs {
		fmt.Fprintf(b, "| %s |", cell(s))
		for _, st := range shownStates {
			fmt.Fprintf(b, " %d |", counts[s][st])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// mdCriteria lists each criterion with its status; a passing or not-tested
// criterion shows counts, a failing one its first reason.
func mdCriteria(b *bytes.Buffer, v *evidence.Verdict) {
	if v == nil {
		return
	}
	b.WriteString("## Criteria\n\n| Criterion | Status | Findings |\n| --- | --- | --- |\n")
	for _, c := range v.Criteria {
		probesN := 0
		for _, r := range c.Reasons {
			if _, ok := reasonProbe(r); ok {
				probesN++
			}
		}
		var what string
		switch c.Status {
		case evidence.StatusFail, evidence.StatusUnconfirmed:
			what = fmt.Sprintf("%d reason(s); first: %s", len(c.Reasons), cell(first(c.Reasons)))
		case evidence.StatusPass:
			what = fmt.Sprintf("%d probe result(s) held", probesN)
		case evidence.StatusWaived:
			what = fmt.Sprintf("%d finding(s) accepted by waivers", len(c.Reasons))
		default:
			what = cell(first(c.Reasons))
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", cell(c.ID), statusWord(c.Status), what)
	}
	b.WriteString("\n")
}

func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

// mdRisks writes the residual-risk register.
func mdRisks(b *bytes.Buffer, rec *evidence.Record) {
	rs := Risks(rec)
	if len(rs) == 0 {
		return
	}
	b.WriteString("## Residual risks\n\n| Risk | Exposure | Accepted by | Owner | Status |\n| --- | --- | --- | --- | --- |\n")
	for i, r := range rs {
		if i == maxListed {
			fmt.Fprintf(b, "\n%d more in report.html.\n", len(rs)-i)
			break
		}
		status := "**needs a decision**"
		if r.Accepted {
			status = "accepted"
		} else if r.Open != "" {
			status = "**open**: " + cell(r.Open)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", cell(r.Title), cell(r.Exposure),
			cell(strings.Join(append(slices.Clone(r.Restrictions), r.Waivers...), "; ")), cell(r.Owner), status)
	}
	b.WriteString("\n")
}

// maxListed bounds the rows of the summary's lists (waivers, warnings,
// errors, risks).
const maxListed = 25

// mdWaivers lists applied and expired waivers and the warnings, so the
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
		for i, w := range ws {
			if i == maxListed {
				fmt.Fprintf(b, "\n%d more in run.json.\n", len(ws)-i)
				break
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", cell(w.ID), cell(w.Criterion), cell(w.Probe),
				cell(w.Target), cell(w.Owner), cell(w.Expires), cell(w.Reason), len(w.Waived))
		}
		b.WriteString("\n")
	}
	table("Applied waivers", v.Waivers)
	table("Expired waivers (no longer applied)", v.ExpiredWaivers)
	list(b, "Warnings", v.Warnings)
}

func list(b *bytes.Buffer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n", title)
	for i, s := range items {
		if i == maxListed {
			fmt.Fprintf(b, "- and %d more in run.json\n", len(items)-i)
			break
		}
		fmt.Fprintf(b, "- %s\n", code(s, false))
	}
	b.WriteString("\n")
}

func mdResultCounts(b *bytes.Buffer, rec *evidence.Record) {
	n := map[state]int{}
	for _, r := range rec.Results {
		st, _, _ := classify(rec.Verdict, r)
		n[st]++
	}
	fmt.Fprintf(b, "## Results\n\n%d results: %d ok, %d fail, %d error, %d skipped, %d not tested. Every result with all its evidence is in report.html and run.json.\n\n",
		len(rec.Results), n[statePass], n[stateFail], n[stateError], n[stateSkipped], n[stateNotTested])
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

func mdErrors(b *bytes.Buffer, errs []string) { list(b, "Harness errors", errs) }
