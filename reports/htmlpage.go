package reports

// htmlSource is the report page's template. Print styles drop the collapsed
// parts and keep each finding on one page.
const htmlSource = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:84rem;padding:0 1rem;color:#1b1f24;line-height:1.35}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.2rem;margin:1.6rem 0 .5rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;width:100%;margin-bottom:1rem}
th,td{border:1px solid #d0d7de;padding:.25rem .45rem;text-align:left;vertical-align:top;font-size:.85rem}
th{background:#f6f8fa}
code,pre{font-family:ui-monospace,monospace;font-size:.8rem;white-space:pre-wrap;word-break:break-word}
.banner{padding:.7rem 1rem;border-radius:6px;font-size:1.15rem;font-weight:600}
.PASS{background:#dafbe1}.FAIL{background:#ffebe9}.NOT{background:#fff8c5}
.s-fail,.s-unconfirmed,.s-error{color:#cf222e;font-weight:600}.s-pass,.s-ok{color:#1a7f37}.s-not-tested{color:#8250df}
.facts th{width:9rem}
.charts{display:flex;flex-wrap:wrap;gap:1.5rem}.chart h3{font-size:.95rem;margin:.3rem 0}
.finding{border:1px solid #d0d7de;border-left:5px solid #cf222e;border-radius:4px;margin:.5rem 0;padding:.4rem .6rem;break-inside:avoid}
.finding.f-error,.finding.f-unconfirmed{border-left-color:#bf8700}
.finding header{font-weight:600}.finding .sev{font-weight:400;color:#57606a}
.side{display:grid;grid-template-columns:1fr 1fr;gap:.6rem;margin:.3rem 0}
.side h4{font-size:.75rem;text-transform:uppercase;color:#57606a;margin:0}
.side ul{margin:.1rem 0;padding-left:1.1rem}
.fix{background:#ddf4ff;padding:.25rem .45rem;border-radius:4px;font-size:.85rem}
details summary{cursor:pointer}
@media print{
 body{margin:0;max-width:none;font-size:9pt}
 .finding{padding:.2rem .4rem;margin:.25rem 0}
 /* A printed or PDF report is the audit copy: every collapsed section
    (results with their evidence, every criterion's reasons, warnings) is
    printed open. */
 details::details-content{content-visibility:visible;display:contents}
 details>summary{list-style:none;font-weight:600;cursor:auto}
 details>summary::-webkit-details-marker{display:none}
 .noprint{display:none}
 .banner,.finding,.fix,th,rect{print-color-adjust:exact;-webkit-print-color-adjust:exact}
 h2{break-after:avoid}tr{break-inside:avoid}
 a{color:inherit;text-decoration:none}
}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="banner {{.VerdictClass}}">{{.Verdict}}</p>
<table class="facts">{{range .Facts}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
<section class="charts">
{{if .ChartCriteria}}<div class="chart"><h3>Criteria at a glance</h3>{{.ChartCriteria}}</div>{{end}}
{{if .ChartCats}}<div class="chart"><h3>Outcomes by category</h3>{{.ChartCats}}</div>{{end}}
<div class="chart"><h3>Timing</h3>{{.ChartTiming}}</div>
</section>
{{if or .Findings .CriterionFindings}}<h2>Failures first ({{len .Findings}} results, {{len .CriterionFindings}} criteria)</h2>
{{range .Findings}}<div class="finding f-{{.State}}"><header><span class="s-{{.State}}">{{.State}}</span> <code>{{.Probe}}</code> <span class="sev">{{.Severity}} · {{.Effective}}, expected {{.Expected}}</span></header>
{{if .Message}}<div><code>{{.Message}}</code></div>{{end}}
<div class="side"><div><h4>What the probe said</h4><ul>{{range .Said}}<li><code>{{.}}</code></li>{{else}}<li>nothing</li>{{end}}</ul></div>
<div><h4>What the host saw</h4><ul>{{range .Saw}}<li><code>{{.}}</code></li>{{else}}<li>nothing</li>{{end}}</ul></div></div>
{{if .More}}<details><summary>{{len .More}} more evidence item(s)</summary><ul>{{range .More}}<li><code>{{.}}</code></li>{{end}}</ul></details>{{end}}
{{if .Fix}}<div class="fix"><b>Fix:</b> {{.Fix}}{{if .Key}} (target key <code>{{.Key}}</code>){{end}}</div>{{end}}</div>
{{end}}{{range .CriterionFindings}}<div class="finding f-{{.Status}}"><header><span class="s-{{.Status}}">{{.Status}}</span> criterion <code>{{.ID}}</code></header>
<ul>{{range $i, $r := .Reasons}}{{if lt $i 4}}<li><code>{{$r}}</code></li>{{end}}{{end}}</ul>{{if gt (len .Reasons) 4}}<details><summary>{{len .Reasons}} reasons in all</summary><ul>{{range .Reasons}}<li><code>{{.}}</code></li>{{end}}</ul></details>{{end}}</div>
{{end}}{{end}}
{{if .Criteria}}<h2>Criteria</h2>
<table><tr><th>Criterion</th><th>Status</th><th>Findings</th></tr>
{{range .Criteria}}<tr><td><code>{{.ID}}</code></td><td class="s-{{.Status}}">{{.Status}}</td><td>{{.Summary}}{{if .Reasons}} <details><summary>reasons</summary>{{range .Reasons}}<div><code>{{.}}</code></div>{{end}}</details>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Risks}}<h2>Residual risks</h2>
<table><tr><th>Risk</th><th>Exposure</th><th>Accepted by</th><th>Owner</th><th>Status</th></tr>
{{range .Risks}}<tr><td>{{.Title}}</td><td>{{.Exposure}}</td><td>{{range .Restrictions}}<div>{{.}}</div>{{end}}{{range .Waivers}}<div>waiver <code>{{.}}</code></div>{{end}}</td><td>{{.Owner}}</td><td>{{if .Accepted}}accepted{{else if .Open}}<span class="s-fail">open: {{.Open}}</span>{{else}}<span class="s-fail">needs a decision</span>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Waivers}}<h2>Applied waivers</h2>
<table><tr><th>Waiver</th><th>Criterion</th><th>Probe</th><th>Owner</th><th>Expires</th><th>Reason</th></tr>
{{range .Waivers}}<tr><td><code>{{plain .ID}}</code></td><td>{{plain .Criterion}}</td><td>{{plain .Probe}}</td><td>{{plain .Owner}}</td><td>{{plain .Expires}}</td><td>{{plain .Reason}}</td></tr>
{{end}}</table>{{end}}
{{if .Expired}}<h2>Expired waivers (no longer applied)</h2>
<table><tr><th>Waiver</th><th>Criterion</th><th>Probe</th><th>Owner</th><th>Expires</th><th>Reason</th></tr>
{{range .Expired}}<tr><td><code>{{plain .ID}}</code></td><td>{{plain .Criterion}}</td><td>{{plain .Probe}}</td><td>{{plain .Owner}}</td><td>{{plain .Expires}}</td><td>{{plain .Reason}}</td></tr>
{{end}}</table>{{end}}
{{if .Warnings}}<h2>Warnings</h2><details><summary>{{len .Warnings}} warning(s)</summary><ul>{{range .Warnings}}<li><code>{{.}}</code></li>{{end}}</ul></details>{{end}}
<h2>All results</h2>
<p>{{len .Results}} results: {{index .Counts "ok"}} ok, {{index .Counts "fail"}} fail, {{index .Counts "error"}} error, {{index .Counts "skipped"}} skipped, {{index .Counts "not-tested"}} not tested.</p>
<details><summary>Every result with its evidence</summary>
<table><tr><th>Probe</th><th>Criterion</th><th>Severity</th><th>Expected</th><th>Reported</th><th>Effective</th><th>Status</th><th>Why / evidence</th><th>s</th></tr>
{{range .Results}}<tr id="result-{{.Probe}}"><td><code>{{.Probe}}</code></td><td>{{.Criterion}}</td><td>{{.Severity}}</td><td>{{.Expected}}</td><td>{{.Reported}}</td><td>{{.Effective}}</td><td class="s-{{.State}}">{{.State}}</td>
<td>{{if .Message}}<div><code>{{.Message}}</code></div>{{end}}{{if .Detail}}<div><code>detail: {{.Detail}}</code></div>{{end}}{{range .Evidence}}<div><code>{{.}}</code></div>{{end}}</td><td>{{printf "%.2f" .Seconds}}</td></tr>
{{end}}</table></details>
{{with .Tracer}}<h2>Kernel view (eBPF tracer)</h2>
<p>Status <code>{{plain .Status}}</code>{{if .Reason}} (<code>{{plain .Reason}}</code>){{end}}; runtime <code>{{plain .Runtime}}</code>; host kernel surface: {{len .HostSyscalls}} distinct syscalls.</p>
{{if .HostSyscalls}}<details><summary>Host syscalls</summary><pre>{{range .HostSyscalls}}{{plain .}} {{end}}</pre></details>{{end}}{{end}}
<h2>Timing</h2>
<table><tr><th>Total</th><th>Sandbox start</th><th>Probes</th><th>Started</th><th>Finished</th></tr>
<tr><td>{{printf "%.1f" .Timing.TotalSeconds}} s</td><td>{{printf "%.1f" .Timing.SandboxStartSeconds}} s</td><td>{{printf "%.1f" .Timing.ProbeSeconds}} s</td><td>{{.Started}}</td><td>{{.Finished}}</td></tr></table>
<h2>Digests</h2>
<table>{{range .Digests}}<tr><th>{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>{{end}}</table>
{{if .Errors}}<h2>Harness errors</h2><ul>{{range .Errors}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
</body>
</html>
`
