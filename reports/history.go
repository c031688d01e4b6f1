package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// HistoryRow is one stored run in the trend: its verdict and counts, and
// what changed since the previous run of the same target.
type HistoryRow struct {
	Path, RunID, Target, Started, Runner, Runtime, Kernel, Image, Policy, Verdict string
	Failed, Unconfirmed, NotTested, Held, Results                                 int
	// Material lists what changed since the previous run of the target.
	Material []string
	// NewFailures and Fixed count results against that previous run.
	NewFailures, Fixed int
	Regressed          bool
}

// History builds the trend over stored runs (oldest first, as LoadRecords
// returns them), each compared with the previous run of its target.
func History(runs []Stored) []HistoryRow {
	var rows []HistoryRow
	last := map[string]int{}
	for i, s := range runs {
		rec := s.Record
		row := HistoryRow{Path: plain(s.Path), RunID: plain(rec.RunID), Target: plain(rec.Target.Name), Started: stamp(rec.StartedAt),
			Runner: plain(rec.Runner), Runtime: plain(rec.Runtime), Kernel: plain(rec.Host.Kernel), Image: short(rec.Image.Digest),
			Policy: short(rec.Tool.PolicyVersion), Verdict: verdictWord(rec.Verdict), Results: len(rec.Results)}
		for _, r := range rec.Results {
			switch st, _, _ := classify(rec.Verdict, r); st {
			case stateFail:
				row.Failed++
			case stateError:
				row.Unconfirmed++
			case stateNotTested:
				row.NotTested++
			case statePass:
				row.Held++
			}
		}
		if j, ok := last[rec.Target.Name]; ok {
			d := Diff(runs[j].Record, rec)
			for _, c := range d.Material {
				row.Material = append(row.Material, c.What)
			}
			row.NewFailures, row.Fixed, row.Regressed = len(d.NewFailures), len(d.Fixed), d.Regressed()
		}
		last[rec.Target.Name] = i
		rows = append(rows, row)
	}
	return rows
}

// short cuts a digest to its algorithm and 12 hex digits.
func short(digest string) string {
	d := plain(digest)
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}

// WriteHistoryMarkdown writes the trend as a Markdown table, newest first.
func WriteHistoryMarkdown(w io.Writer, rows []HistoryRow) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# sandcheck history\n\n%d stored run(s), newest first. A run is compared with the previous run of its target.\n\n", len(rows))
	b.WriteString("| Started | Target | Runner | Kernel | Image | Policy | Verdict | Failed | Unconfirmed | Held | New failures | Fixed | Material changes |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		verdict := r.Verdict
		if r.Regressed {
			verdict += " (**regression**)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %d | %s |\n", cell(r.Started), cell(r.Target),
			cell(r.Runner+" "+r.Runtime), cell(r.Kernel), cell(r.Image), cell(r.Policy), verdict, r.Failed, r.Unconfirmed, r.Held,
			r.NewFailures, r.Fixed, cell(strings.Join(r.Material, ", ")))
	}
	_, err := w.Write(b.Bytes())
	return err
}

var historyTmpl = template.Must(template.New("history").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>sandcheck history</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:90rem;padding:0 1rem;color:#1b1f24}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #d0d7de;padding:.25rem .45rem;font-size:.85rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}.fail,.reg{color:#cf222e;font-weight:600}.pass{color:#1a7f37}code{font-size:.8rem}
@media print{body{margin:0;max-width:none}}
</style>
</head>
<body>
<h1>sandcheck history</h1>
<p>{{len .Rows}} stored run(s), newest first; each compared with the previous run of its target.</p>
<h2>Failed results per run</h2>
{{.Chart}}
<table><tr><th>Started</th><th>Target</th><th>Runner</th><th>Kernel</th><th>Image</th><th>Policy</th><th>Verdict</th><th>Failed</th><th>Unconfirmed</th><th>Held</th><th>New failures</th><th>Fixed</th><th>Material changes</th></tr>
{{range .Newest}}<tr><td>{{.Started}}</td><td>{{.Target}}</td><td>{{.Runner}} {{.Runtime}}</td><td><code>{{.Kernel}}</code></td><td><code>{{.Image}}</code></td><td><code>{{.Policy}}</code></td>
<td class="{{.Verdict}}">{{.Verdict}}{{if .Regressed}} <span class="reg">regression</span>{{end}}</td><td>{{.Failed}}</td><td>{{.Unconfirmed}}</td><td>{{.Held}}</td><td>{{.NewFailures}}</td><td>{{.Fixed}}</td><td>{{range .Material}}<div>{{.}}</div>{{end}}</td></tr>
{{end}}</table>
</body>
</html>
`))

// WriteHistoryHTML writes the trend page: a chart of failed results per
// run and the table, self-contained like report.html.
func WriteHistoryHTML(w io.Writer, rows []HistoryRow) error {
	newest := make([]HistoryRow, len(rows))
	for i, r := range rows {
		newest[len(rows)-1-i] = r
	}
	return historyTmpl.Execute(w, struct {
		Rows, Newest []HistoryRow
		Chart        template.HTML
	}{rows, newest, svgTrend(rows)})
}

// svgTrend draws failed and unconfirmed results per run, oldest left, a
// regression marked red.
func svgTrend(rows []HistoryRow) template.HTML {
	if len(rows) == 0 {
		return ""
	}
	most := 1
	for _, r := range rows {
		most = max(most, r.Failed+r.Unconfirmed)
	}
	const h, barW = 120, 16
	width := len(rows)*(barW+4) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg role="img" aria-label="Failed results per run" width="%d" height="%d" viewBox="0 0 %d %d">`, width, h+20, width, h+20)
	for i, r := range rows {
		x := 30 + i*(barW+4)
		fh := float64(r.Failed) * h / float64(most)
		uh := float64(r.Unconfirmed) * h / float64(most)
		fill := "#cf222e"
		if !r.Regressed {
			fill = "#fa7a6f"
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s: %d failed</title></rect>`,
			x, h-fh, barW, fh, fill, esc(r.Started), esc(r.Target), r.Failed)
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#bf8700"><title>%d unconfirmed</title></rect>`,
			x, h-fh-uh, barW, uh, r.Unconfirmed)
	}
	fmt.Fprintf(&b, `<text x="0" y="12" font-size="11">%d</text><text x="0" y="%d" font-size="11">0</text><line x1="28" y1="%d" x2="%d" y2="%d" stroke="#57606a"/>`,
		most, h, h, width, h)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
