package reports

import (
	"fmt"
	"html"
	"html/template"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// The report's charts are inline SVG built here from numbers the reports
// compute and text escaped with html.EscapeString, so the page stays one
// self-contained file with nothing loaded and no script.

// stateColor is the fill of a result state or criterion status.
var stateColor = map[string]string{
	string(stateFail): "#cf222e", evidence.StatusUnconfirmed: "#bf8700", string(stateError): "#bf8700",
	string(stateNotTested): "#8250df", string(stateSkipped): "#8c959f",
	evidence.StatusWaived: "#8c959f", string(statePass): "#1a7f37", evidence.StatusPass: "#1a7f37",
}

func colorOf(s string) string {
	if c, ok := stateColor[s]; ok {
		return c
	}
	return "#6e7781"
}

func esc(s string) string { return html.EscapeString(plain(s)) }

// svgCriteria draws one tile per criterion, coloured by status.
func svgCriteria(cs []evidence.Criterion) template.HTML {
	if len(cs) == 0 {
		return ""
	}
	const w, h, cols = 170, 34, 4
	rows := (len(cs) + cols - 1) / cols
	var b strings.Builder
	fmt.Fprintf(&b, `<svg role="img" aria-label="Criteria at a glance" width="%d" height="%d" viewBox="0 0 %d %d">`, cols*w, rows*h, cols*w, rows*h)
	for i, c := range cs {
		x, y := (i%cols)*w, (i/cols)*h
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s"><title>%s: %s</title></rect>`,
			x+2, y+2, w-4, h-4, colorOf(c.Status), esc(c.ID), esc(c.Status))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#fff">%s</text>`, x+8, y+21, esc(truncRunes(c.ID, 26)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// svgCategories draws one stacked bar per probe category: failed,
// unconfirmed, not tested, skipped and held results.
func svgCategories(rec *evidence.Record) template.HTML {
	byCat := map[string]map[state]int{}
	for _, r := range rec.Results {
		st, _, _ := classify(rec.Verdict, r)
		if byCat[r.Category] == nil {
			byCat[r.Category] = map[state]int{}
		}
		byCat[r.Category][st]++
	}
	if len(byCat) == 0 {
		return ""
	}
	keys := map[string][]evidence.Result{}
	for c := range byCat {
		keys[c] = nil
	}
	cats := categoryOrder(keys)
	most := 1
	for _, n := range byCat {
		t := 0
		for _, v := range n {
			t += v
		}
		most = max(most, t)
	}
	const label, barW, rowH = 110, 380, 20
	height := len(cats)*rowH + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg role="img" aria-label="Outcomes by category" width="%d" height="%d" viewBox="0 0 %d %d">`, label+barW+40, height, label+barW+40, height)
	for i, c := range cats {
		y := i * rowH
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11">%s</text>`, y+14, esc(truncRunes(c, 16)))
		x := float64(label)
		total := 0
		for _, st := range shownStates {
			n := byCat[c][st]
			if n == 0 {
				continue
			}
			total += n
			wd := float64(n) * barW / float64(most)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %d</title></rect>`,
				x, y+3, wd, rowH-6, colorOf(string(st)), esc(c), st, n)
			x += wd
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%d</text>`, x+4, y+14, total)
	}
	y := len(cats)*rowH + 16
	x := 0
	for _, st := range shownStates {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
			x, y-9, colorOf(string(st)), x+14, y, st)
		x += 90
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// svgTiming draws the run's phases and its slowest probes as bars.
func svgTiming(rec *evidence.Record) template.HTML {
	type bar struct {
		name string
		sec  float64
		fill string
	}
	bars := []bar{{"total", rec.Timing.TotalSeconds, "#0969da"}, {"sandbox start", rec.Timing.SandboxStartSeconds, "#54aeff"},
		{"probes", rec.Timing.ProbeSeconds, "#54aeff"}}
	rs := append([]evidence.Result(nil), rec.Results...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Seconds > rs[j].Seconds })
	for i, r := range rs {
		if i == 10 {
			break
		}
		bars = append(bars, bar{r.Probe, r.Seconds, "#8c959f"})
	}
	most := 0.001
	for _, b := range bars {
		most = max(most, b.sec)
	}
	const label, barW, rowH = 190, 330, 18
	height := len(bars) * rowH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg role="img" aria-label="Timing" width="%d" height="%d" viewBox="0 0 %d %d">`, label+barW+60, height, label+barW+60, height)
	for i, br := range bars {
		y := i * rowH
		wd := br.sec * barW / most
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11">%s</text><rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d" font-size="11">%.1f s</text>`,
			y+13, esc(truncRunes(br.name, 30)), label, y+3, wd, rowH-6, br.fill, float64(label)+wd+4, y+13, br.sec)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func truncRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
