package reports

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"io"
	"sort"

	"github.com/sandcheck/sandcheck/evidence"
)

// HTML writes one self-contained page for auditors and release managers:
// the verdict, charts (criteria at a glance, outcomes by category, timing)
// as inline SVG, the failures first with what the probe said beside what
// the host saw and the remediation, the criteria, the residual-risk
// register, waivers, every result, the kernel view, timing and the digests
// of the run's files. It has no script and loads nothing (a content
// security policy forbids it), and prints without its collapsed parts.
// html/template escapes every string from the record, and plain() takes out
// control and bidi characters first.
type HTML struct{}

var _ Writer = HTML{}

// Format returns "html".
func (HTML) Format() string { return "html" }

type htmlResult struct {
	Probe, Criterion, Severity, Expected, Reported, Effective, State, Message, Detail string
	Seconds                                                                           float64
	Evidence                                                                          []string
}

// htmlFinding is one failed or unconfirmed result, evidence split by who
// observed it.
type htmlFinding struct {
	Probe, Severity, Effective, Expected, State, Message, Fix, Key string
	Said, Saw, More                                                []string
}

// maxSideShown is how many evidence items per side a finding shows; the
// rest (informative ones last) fold into "more".
const maxSideShown = 2

type htmlCriterion struct {
	ID, Status, Summary string
	Reasons             []string
}

type htmlPage struct {
	Title, Verdict, VerdictClass string
	Facts                        [][2]string
	Findings                     []htmlFinding
	CriterionFindings            []htmlCriterion
	Criteria                     []htmlCriterion
	Risks                        []Risk
	Waivers, Expired             []evidence.WaiverUse
	Warnings, Errors             []string
	Results                      []htmlResult
	Counts                       map[string]int
	Tracer                       *evidence.Tracer
	Timing                       evidence.Timing
	Started, Finished            string
	Digests                      [][2]string
	ChartCriteria, ChartCats     template.HTML
	ChartTiming                  template.HTML
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"plain": plain}).Parse(htmlSource))

// Write writes the HTML page of rec.
func (HTML) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing html: record is nil")
	}
	p := htmlPage{
		Title: "sandcheck run " + plain(rec.RunID), Counts: map[string]int{},
		Facts: [][2]string{
			{"Target", plain(rec.Target.Name + "  " + rec.Target.Path)},
			{"Profile", plain(rec.Target.Profile)},
			{"Runner", plain(rec.Runner + " " + rec.Runtime)},
			{"Image", plain(rec.Image.Ref)},
			{"Host kernel", plain(rec.Host.Kernel)},
			{"Started by", plain(rec.StartedBy)},
			{"sandcheck", plain(rec.Tool.Version)},
		},
		Tracer: rec.Tracer, Timing: rec.Timing, Started: stamp(rec.StartedAt), Finished: stamp(rec.FinishedAt),
		ChartCats: svgCategories(rec), ChartTiming: svgTiming(rec), Risks: Risks(rec),
	}
	switch v := rec.Verdict; {
	case v == nil:
		p.Verdict, p.VerdictClass = "Verdict: NOT GRADED (the record carries no verdict)", "NOT"
	default:
		p.Verdict = stripBold(verdictLine(v))
		p.VerdictClass = map[bool]string{true: "PASS", false: "FAIL"}[v.Pass]
		p.Waivers, p.Expired = v.Waivers, v.ExpiredWaivers
		p.ChartCriteria = svgCriteria(v.Criteria)
		for _, s := range v.Warnings {
			p.Warnings = append(p.Warnings, plain(s))
		}
		for _, c := range v.Criteria {
			p.Criteria = append(p.Criteria, htmlCriterionOf(c))
		}
		for _, c := range criterionFindings(v) {
			p.CriterionFindings = append(p.CriterionFindings, htmlCriterionOf(c))
		}
	}
	for _, e := range rec.Errors {
		p.Errors = append(p.Errors, plain(e))
	}
	for _, f := range findings(rec) {
		p.Findings = append(p.Findings, htmlFindingOf(f))
	}
	for _, r := range rec.Results {
		st, msg, _ := classify(rec.Verdict, r)
		p.Counts[string(st)]++
		hr := htmlResult{Probe: plain(r.Probe), Criterion: plain(r.Criterion), Severity: plain(severityOf(r)),
			Expected: plain(string(r.Expected)), Reported: plain(string(r.Outcome)),
			Effective: plain(string(effective(rec.Verdict, r))), State: string(st), Message: plain(msg),
			Detail: plain(r.Detail), Seconds: r.Seconds}
		for _, it := range r.Evidence {
			hr.Evidence = append(hr.Evidence, plain(itemLine(it)))
		}
		p.Results = append(p.Results, hr)
	}
	p.Digests = digests(rec)
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, p); err != nil {
		return fmt.Errorf("writing html: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing html: %w", err)
	}
	return nil
}

func htmlCriterionOf(c evidence.Criterion) htmlCriterion {
	hc := htmlCriterion{ID: plain(c.ID), Status: plain(c.Status)}
	n := 0
	for _, r := range c.Reasons {
		hc.Reasons = append(hc.Reasons, plain(r))
		if _, ok := reasonProbe(r); ok {
			n++
		}
	}
	switch c.Status {
	case evidence.StatusPass:
		hc.Summary = fmt.Sprintf("%d probe result(s) held", n)
	default:
		hc.Summary = fmt.Sprintf("%d reason(s)", len(c.Reasons))
	}
	return hc
}

func htmlFindingOf(f finding) htmlFinding {
	hf := htmlFinding{Probe: plain(f.r.Probe), Severity: plain(severityOf(f.r)), Effective: plain(string(f.eff)),
		Expected: plain(string(f.r.Expected)), State: string(f.st), Message: plain(f.msg), Fix: remediation(f.r.Probe)}
	if keys := targetKeys(f.r.Probe, f.r.Criterion); len(keys) > 0 {
		hf.Key = keys[0]
	}
	said, saw := splitEvidence(f.r)
	if f.r.Detail != "" {
		said = append([]evidence.Item{{Source: "detail", Kind: "probe", Summary: f.r.Detail, Indicates: "x"}}, said...)
	}
	side := func(items []evidence.Item) []string {
		// Items that indicate an outcome first, those that only inform last.
		sort.SliceStable(items, func(i, j int) bool { return items[i].Indicates != "" && items[j].Indicates == "" })
		var shown []string
		for i, it := range items {
			line := plain(itemLine(it))
			if it.Source == "detail" {
				line = "detail: " + plain(it.Summary)
			}
			if i < maxSideShown {
				shown = append(shown, line)
			} else {
				hf.More = append(hf.More, line)
			}
		}
		return shown
	}
	hf.Said, hf.Saw = side(said), side(saw)
	return hf
}

// digests are what an auditor checks the run against: the record itself
// (the sha256 of run.json as the JSON writer writes it), the target file,
// the image and the policy.
func digests(rec *evidence.Record) [][2]string {
	var b bytes.Buffer
	run := "(not encodable)"
	if err := (JSON{}).Write(&b, rec); err == nil {
		run = fmt.Sprintf("sha256:%x", sha256.Sum256(b.Bytes()))
	}
	out := [][2]string{
		{"run.json", run},
		{"target " + plain(rec.Target.Path), plain(rec.Target.Digest)},
		{"image " + plain(rec.Image.Ref), plain(rec.Image.Digest)},
		{"policy", plain(rec.Tool.PolicyVersion)},
	}
	for _, o := range rec.Outputs {
		if o.Release == nil {
			continue
		}
		for _, a := range o.Release.Artifacts {
			if len(out) == 24 {
				return append(out, [2]string{"…", "more output artifacts in run.json"})
			}
			if a.SHA256 != "" {
				out = append(out, [2]string{"output " + plain(a.Path), plain(a.SHA256)})
			}
		}
	}
	return out
}

// stripBold removes the Markdown emphasis of verdictLine.
func stripBold(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte("**"), nil)) }
