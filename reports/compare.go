package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// CompareColumn is one sandbox kind in a comparison: a stored run, named by
// its runner and runtime, with its start time and host kernel surface.
type CompareColumn struct {
	Kind, Target, RunID, Kernel, Verdict string
	// Runner is the run's runner as run.json records it, and Through how
	// the harness reached its sandboxes (Reach).
	Runner, Through string
	// Remote is set for a runner that reaches the platform's sandboxes
	// through the platform's own API or CLI: the host kernel and tracer are
	// then the harness's, not the sandboxes'.
	Remote bool
	// StartSeconds is the mean start time of the run's sandboxes.
	StartSeconds float64
	Sandboxes    int
	// Surface is how many distinct host syscalls the tracer saw (-1: no
	// tracer view); SurfaceStatus says why it may be incomplete.
	Surface       int
	SurfaceStatus string
	// Watch is which of the run's sandboxes the tracer watched
	// (comparetrace.go).
	Watch TraceWatch
	// Outcome maps a probe to its effective outcome in this run.
	Outcome map[string]string
	// Escaped counts the probes that escaped.
	Escaped int
	// Confirmed holds the probes whose effective outcome rests on the
	// host's evidence (hostConfirmed), not on the probe's word alone.
	Confirmed map[string]bool
	// Dir is the folder of the run's record; Report the link to its
	// report page from where the comparison is written (LinkReports).
	Dir, Report string
	// Explained gives, for each inconclusive cell, why the reference says
	// the runner cannot measure it (ExplainInconclusive).
	Explained map[string]string
}

// Comparison is a matrix of probes by sandbox kind.
type Comparison struct {
	Columns []CompareColumn
	Probes  []string
}

// kindRank orders sandbox kinds for the matrix: the unsandboxed control
// first, then the local kinds from the weakest isolation to the strongest,
// then the platforms reached through their own API or CLI.
func kindRank(kind string) int {
	order := []string{"process", "bwrap", "docker/runc", "docker/crun", "docker/runsc", "docker/kata"}
	if i := slices.Index(order, kind); i >= 0 {
		return i
	}
	runner, _, _ := strings.Cut(kind, "/")
	if i := slices.Index(remoteOrder, runner); i >= 0 {
		return len(order) + 2 + i
	}
	return len(order) + 1
}

// remoteOrder lists the runners that reach a platform's sandboxes through
// its own API or CLI, in the matrix's order.
var remoteOrder = []string{"kubernetes", "opensandbox", "gateway", "command"}

// Reach says how the harness reached a runner's sandboxes, for the matrix.
func Reach(runner string) string {
	switch runner {
	case "process":
		return "host process (no sandbox)"
	case "bwrap":
		return "bubblewrap on this host"
	case "docker":
		return "this host's Docker engine"
	case "kubernetes":
		return "the cluster's API"
	case "opensandbox":
		return "OpenSandbox lifecycle API and execd"
	case "gateway":
		return "the gateway's API"
	case "command":
		return "the platform's CLI (command templates)"
	}
	return "runner " + runner
}

// Compare builds the matrix over stored runs: one column per run, named by
// its sandbox kind (runner, and runtime where the runner has one).
func Compare(runs []Stored) Comparison {
	var c Comparison
	seen := map[string]bool{}
	for _, s := range runs {
		rec := s.Record
		kind := plain(rec.Runner)
		if rec.Runtime != "" && rec.Runtime != rec.Runner {
			kind += "/" + plain(rec.Runtime)
		}
		col := CompareColumn{Kind: kind, Target: plain(rec.Target.Name), RunID: plain(rec.RunID), Kernel: plain(rec.Host.Kernel),
			Verdict: verdictWord(rec.Verdict), Sandboxes: len(rec.Sandboxes), Surface: -1, Outcome: map[string]string{},
			Runner: plain(rec.Runner), Through: plain(Reach(rec.Runner)), Remote: slices.Contains(remoteOrder, rec.Runner),
			Confirmed: map[string]bool{}, Dir: filepath.Dir(s.Path)}
		var start float64
		for _, sb := range rec.Sandboxes {
			start += sb.StartSeconds
		}
		if len(rec.Sandboxes) > 0 {
			col.StartSeconds = start / float64(len(rec.Sandboxes))
		}
		if t := rec.Tracer; t != nil {
			col.SurfaceStatus = plain(t.Status)
			if t.Status == "on" || t.Status == "partial" {
				col.Surface = len(t.HostSyscalls)
			}
			col.Watch = traceWatch(t)
		}
		for _, r := range rec.Results {
			eff := effective(rec.Verdict, r)
			col.Outcome[r.Probe] = plain(string(eff))
			if hostConfirmed(eff, r) {
				col.Confirmed[r.Probe] = true
			}
			if eff == probes.Escaped {
				col.Escaped++
			}
			if !seen[r.Probe] {
				seen[r.Probe] = true
				c.Probes = append(c.Probes, r.Probe)
			}
		}
		c.Columns = append(c.Columns, col)
	}
	sort.SliceStable(c.Columns, func(i, j int) bool { return kindRank(c.Columns[i].Kind) < kindRank(c.Columns[j].Kind) })
	sort.Strings(c.Probes)
	return c
}

// outcomeMark is a matrix cell: short, so many columns fit.
func outcomeMark(o string) string {
	switch probes.Outcome(o) {
	case probes.Escaped:
		return "escaped"
	case probes.Blocked:
		return "blocked"
	case probes.NotApplicable:
		return "n/a"
	case probes.Inconclusive:
		return "inconclusive"
	case "":
		return "-"
	}
	return o
}

// WriteCompareMarkdown writes the matrix as Markdown.
func WriteCompareMarkdown(w io.Writer, c Comparison) error {
	var b bytes.Buffer
	b.WriteString("# sandcheck compare\n\n")
	row := func(label string, f func(CompareColumn) string) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, col := range c.Columns {
			fmt.Fprintf(&b, " %s |", f(col))
		}
		b.WriteString("\n")
	}
	row("Sandbox kind", func(col CompareColumn) string { return cell(col.Kind) })
	b.WriteString("| ---" + strings.Repeat(" | ---", len(c.Columns)) + " |\n")
	row("Runner", func(col CompareColumn) string { return cell(col.Runner) })
	row("Reached through", func(col CompareColumn) string { return cell(col.Through) })
	row("Target", func(col CompareColumn) string { return cell(col.Target) })
	row("Verdict", func(col CompareColumn) string { return col.Verdict })
	row("Mean sandbox start", func(col CompareColumn) string { return fmt.Sprintf("%.2f s", col.StartSeconds) })
	row("Host kernel surface", func(col CompareColumn) string { return surfaceText(col, cell) })
	row("Host kernel", func(col CompareColumn) string { return kernelText(col, cell(col.Kernel)) })
	row("Escaped", func(col CompareColumn) string { return fmt.Sprintf("%d of %d", col.Escaped, len(col.Outcome)) })
	row("Blocked", func(col CompareColumn) string { return fmt.Sprintf("%d", col.count(probes.Blocked)) })
	row("Inconclusive (explained)", func(col CompareColumn) string { return inconclusiveText(col) })
	row("Host-confirmed", func(col CompareColumn) string { return fmt.Sprintf("%d of %d", len(col.Confirmed), len(col.Outcome)) })
	for _, p := range c.Probes {
		row(cell(p), func(col CompareColumn) string { return cellMark(col, p) })
	}
	writeExplainedMarkdown(&b, c)
	_, err := w.Write(b.Bytes())
	return err
}

// kernelText is the host kernel cell: on a remote platform the kernel the
// record names is the harness's, never the sandboxes'.
func kernelText(col CompareColumn, kernel string) string {
	if col.Remote {
		return "harness's: " + kernel
	}
	return kernel
}

var compareTmpl = template.Must(template.New("compare").Funcs(template.FuncMap{"mark": outcomeMark, "surface": surfaceHTML,
	"cellmark": cellMark, "inconclusive": inconclusiveText, "explained": explainedCells, "legend": func() string { return confirmedLegend },
	"kernel": func(col CompareColumn) string { return kernelText(col, col.Kernel) }}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>sandcheck compare</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:90rem;padding:0 1rem;color:#1b1f24}
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:.2rem .45rem;font-size:.8rem;text-align:left}
th{background:#f6f8fa}td.escaped{background:#ffebe9;color:#cf222e}td.blocked{background:#dafbe1;color:#1a7f37}
td.inconclusive{background:#fff8c5}td a{color:inherit}code{font-size:.78rem}
@media print{body{margin:0;max-width:none}td.escaped,td.blocked,td.inconclusive{print-color-adjust:exact;-webkit-print-color-adjust:exact}}
</style>
</head>
<body>
<h1>sandcheck compare</h1>
<table>
<tr><th>Sandbox kind</th>{{range .Columns}}<th>{{.Kind}}</th>{{end}}</tr>
<tr><th>Runner</th>{{range .Columns}}<td>{{.Runner}}</td>{{end}}</tr>
<tr><th>Reached through</th>{{range .Columns}}<td>{{.Through}}</td>{{end}}</tr>
<tr><th>Target</th>{{range .Columns}}<td>{{.Target}}</td>{{end}}</tr>
<tr><th>Verdict</th>{{range .Columns}}<td>{{.Verdict}}</td>{{end}}</tr>
<tr><th>Mean sandbox start</th>{{range .Columns}}<td>{{printf "%.2f" .StartSeconds}} s</td>{{end}}</tr>
<tr><th>Host kernel surface</th>{{range .Columns}}<td>{{surface .}}</td>{{end}}</tr>
<tr><th>Host kernel</th>{{range .Columns}}<td><code>{{kernel .}}</code></td>{{end}}</tr>
<tr><th>Escaped</th>{{range .Columns}}<td>{{.Escaped}} of {{len .Outcome}}</td>{{end}}</tr>
<tr><th>Blocked</th>{{range .Columns}}<td>{{.Count "blocked"}}</td>{{end}}</tr>
<tr><th>Inconclusive (explained)</th>{{range .Columns}}<td>{{inconclusive .}}</td>{{end}}</tr>
<tr><th>Host-confirmed</th>{{range .Columns}}<td>{{len .Confirmed}} of {{len .Outcome}}</td>{{end}}</tr>
{{range $p := .Probes}}<tr><th><code>{{$p}}</code></th>{{range $.Columns}}{{$o := index .Outcome $p}}<td class="{{$o}}"{{with index .Explained $p}} title="{{.}}"{{end}}>{{if and .Report $o}}<a href="{{.Report}}#result-{{$p}}">{{cellmark . $p}}</a>{{else}}{{cellmark . $p}}{{end}}</td>{{end}}</tr>
{{end}}</table>
<p>{{legend}}</p>
{{if explained .}}<h2>Explained inconclusive cells</h2>
<table><tr><th>Sandbox kind</th><th>Target</th><th>Probe</th><th>Why the runner cannot measure it</th></tr>
{{range explained .}}<tr><td>{{.Kind}}</td><td>{{.Target}}</td><td><code>{{.Probe}}</code></td><td>{{.Why}}</td></tr>
{{end}}</table>{{end}}
</body>
</html>
`))

// WriteCompareHTML writes the matrix as a self-contained page.
func WriteCompareHTML(w io.Writer, c Comparison) error { return compareTmpl.Execute(w, c) }
