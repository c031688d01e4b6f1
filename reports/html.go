package reports

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"

	"github.com/sandcheck/sandcheck/evidence"
)

// HTML writes one self-contained page for people who do not read JSON (an
// auditor, a release manager): the verdict, each criterion with its reasons,
// every result with its evidence, the tracer's view and timing. It has no
// script and loads nothing; html/template escapes every string from the
// record, and plain() takes out control and bidi characters first.
type HTML struct{}

var _ Writer = HTML{}

// Format returns "html".
func (HTML) Format() string { return "html" }

type htmlResult struct {
	Probe, Criterion, Severity, Expected, Reported, Effective, State, Message, Detail string
	Seconds                                                                           float64
	Evidence                                                                          []string
}

type htmlPage struct {
	Title, Verdict, VerdictClass string
	Facts                        [][2]string
	Criteria                     []evidence.Criterion
	Waivers, Expired             []evidence.WaiverUse
	Warnings, Errors             []string
	Results                      []htmlResult
	Counts                       map[string]int
	Tracer                       *evidence.Tracer
	Timing                       evidence.Timing
	Started, Finished            string
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"plain": plain}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:80rem;color:#1b1f24}
table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#f6f8fa}
code,pre{font-family:ui-monospace,monospace;font-size:.85rem;white-space:pre-wrap;word-break:break-word}
.banner{padding:.8rem 1rem;border-radius:6px;font-size:1.2rem;font-weight:600}
.PASS{background:#dafbe1}.FAIL{background:#ffebe9}.NOT{background:#fff8c5}
.s-fail,.s-unconfirmed,.s-error{color:#cf222e;font-weight:600}.s-pass,.s-ok{color:#1a7f37}
details summary{cursor:pointer}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="banner {{.VerdictClass}}">{{.Verdict}}</p>
<table>{{range .Facts}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
{{if .Criteria}}<h2>Criteria</h2>
<table><tr><th>Criterion</th><th>Status</th><th>Reasons</th></tr>
{{range .Criteria}}<tr><td><code>{{plain .ID}}</code></td><td class="s-{{plain .Status}}">{{plain .Status}}</td><td>{{range .Reasons}}<div><code>{{plain .}}</code></div>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Waivers}}<h2>Applied waivers</h2>
<table><tr><th>Waiver</th><th>Criterion</th><th>Probe</th><th>Owner</th><th>Expires</th><th>Reason</th></tr>
{{range .Waivers}}<tr><td><code>{{plain .ID}}</code></td><td>{{plain .Criterion}}</td><td>{{plain .Probe}}</td><td>{{plain .Owner}}</td><td>{{plain .Expires}}</td><td>{{plain .Reason}}</td></tr>
{{end}}</table>{{end}}
{{if .Expired}}<h2>Expired waivers (no longer applied)</h2>
<table><tr><th>Waiver</th><th>Criterion</th><th>Probe</th><th>Owner</th><th>Expires</th><th>Reason</th></tr>
{{range .Expired}}<tr><td><code>{{plain .ID}}</code></td><td>{{plain .Criterion}}</td><td>{{plain .Probe}}</td><td>{{plain .Owner}}</td><td>{{plain .Expires}}</td><td>{{plain .Reason}}</td></tr>
{{end}}</table>{{end}}
{{if .Warnings}}<h2>Warnings</h2><ul>{{range .Warnings}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
<h2>Results</h2>
<p>{{len .Results}} results: {{index .Counts "ok"}} ok, {{index .Counts "fail"}} fail, {{index .Counts "error"}} error, {{index .Counts "skipped"}} skipped.</p>
<table><tr><th>Probe</th><th>Criterion</th><th>Severity</th><th>Expected</th><th>Reported</th><th>Effective</th><th>Status</th><th>Why / evidence</th><th>s</th></tr>
{{range .Results}}<tr><td><code>{{.Probe}}</code></td><td>{{.Criterion}}</td><td>{{.Severity}}</td><td>{{.Expected}}</td><td>{{.Reported}}</td><td>{{.Effective}}</td><td class="s-{{.State}}">{{.State}}</td>
<td>{{if .Message}}<div><code>{{.Message}}</code></div>{{end}}<details><summary>{{len .Evidence}} evidence item(s)</summary>{{if .Detail}}<div><code>detail: {{.Detail}}</code></div>{{end}}{{range .Evidence}}<div><code>{{.}}</code></div>{{end}}</details></td><td>{{printf "%.2f" .Seconds}}</td></tr>
{{end}}</table>
{{with .Tracer}}<h2>Kernel view (eBPF tracer)</h2>
<p>Status <code>{{plain .Status}}</code>{{if .Reason}} (<code>{{plain .Reason}}</code>){{end}}; runtime <code>{{plain .Runtime}}</code>; host kernel surface: {{len .HostSyscalls}} distinct syscalls.</p>
{{if .HostSyscalls}}<details><summary>Host syscalls</summary><pre>{{range .HostSyscalls}}{{plain .}} {{end}}</pre></details>{{end}}{{end}}
<h2>Timing</h2>
<table><tr><th>Total</th><th>Sandbox start</th><th>Probes</th><th>Started</th><th>Finished</th></tr>
<tr><td>{{printf "%.1f" .Timing.TotalSeconds}} s</td><td>{{printf "%.1f" .Timing.SandboxStartSeconds}} s</td><td>{{printf "%.1f" .Timing.ProbeSeconds}} s</td><td>{{.Started}}</td><td>{{.Finished}}</td></tr></table>
{{if .Errors}}<h2>Harness errors</h2><ul>{{range .Errors}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
</body>
</html>
`))

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
			{"Image", plain(rec.Image.Ref + " " + rec.Image.Digest)},
			{"Host kernel", plain(rec.Host.Kernel)},
			{"Started by", plain(rec.StartedBy)},
			{"sandcheck", plain(rec.Tool.Version)},
			{"Policy", plain(rec.Tool.PolicyVersion)},
		},
		Tracer: rec.Tracer, Timing: rec.Timing, Started: stamp(rec.StartedAt), Finished: stamp(rec.FinishedAt),
	}
	switch v := rec.Verdict; {
	case v == nil:
		p.Verdict, p.VerdictClass = "Verdict: NOT GRADED (the record carries no verdict)", "NOT"
	default:
		p.Verdict = stripBold(verdictLine(v))
		p.VerdictClass = map[bool]string{true: "PASS", false: "FAIL"}[v.Pass]
		p.Criteria, p.Waivers, p.Expired = v.Criteria, v.Waivers, v.ExpiredWaivers
		for _, s := range v.Warnings {
			p.Warnings = append(p.Warnings, plain(s))
		}
	}
	for _, e := range rec.Errors {
		p.Errors = append(p.Errors, plain(e))
	}
	for _, r := range rec.Results {
		st, msg, _ := classify(rec.Verdict, r)
		p.Counts[string(st)]++
		hr := htmlResult{Probe: plain(r.Probe), Criterion: plain(r.Criterion), Severity: plain(r.Severity),
			Expected: plain(string(r.Expected)), Reported: plain(string(r.Outcome)),
			Effective: plain(string(effective(rec.Verdict, r))), State: string(st), Message: plain(msg),
			Detail: plain(r.Detail), Seconds: r.Seconds}
		for _, it := range r.Evidence {
			hr.Evidence = append(hr.Evidence, plain(itemLine(it)))
		}
		p.Results = append(p.Results, hr)
	}
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, p); err != nil {
		return fmt.Errorf("writing html: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing html: %w", err)
	}
	return nil
}

// stripBold removes the Markdown emphasis of verdictLine.
func stripBold(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte("**"), nil)) }
