package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/reports"
)

// console is how sandcheck's own output looks: on a terminal a line per
// probe as it finishes, in a CI log nothing per probe unless verbose, with
// quiet nothing but the verdict and failures. A line as a probe finishes
// gives what the probe said, which host evidence may overrule: it is never
// marked as what the profile expects or not. The graded outcomes follow the
// verdict (printGraded).
type console struct {
	w            io.Writer
	tty, color   bool
	verbose, q   bool
	lastProgress time.Time
}

func newConsole(w io.Writer, verbose, quiet bool) *console {
	c := &console{w: w, verbose: verbose, q: quiet}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		c.tty = err == nil
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	c.color = c.tty && !noColor
	return c
}

// progress is the engine's Progress for this console.
func (c *console) progress() engine.Progress {
	return func(done, total int, res evidence.Result, elapsed time.Duration) {
		if c.q || (!c.verbose && !c.tty) {
			return
		}
		fmt.Fprintf(c.w, "[%*d/%d] %6.1fs %-14s %s\n", len(fmt.Sprint(total)), done, total, elapsed.Seconds(), reports.Line(string(res.Outcome)), reports.Line(res.Probe))
	}
}

// printGraded prints, after the verdict's grading, each result whose
// graded outcome (host evidence weighed) is not what the profile expects,
// or every result when verbose, with the probe's own claim where the
// grading overruled it. Colour marks expected (green) and not (red) on a
// colour terminal.
func printGraded(w io.Writer, rec *evidence.Record, verbose, color bool) {
	if rec == nil || rec.Verdict == nil {
		return
	}
	header := false
	for i, res := range rec.Results {
		eff := rec.Effective(i)
		exp := res.Expected
		if i < len(rec.Verdict.Results) && rec.Verdict.Results[i].Probe == res.Probe && rec.Verdict.Results[i].Expected != "" {
			exp = rec.Verdict.Results[i].Expected
		}
		match := eff == exp
		if match && !verbose {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\ngraded (host evidence weighed):")
			header = true
		}
		word := fmt.Sprintf("%-14s", reports.Line(string(eff)))
		if color {
			if match {
				word = "\x1b[32m" + word + "\x1b[0m"
			} else {
				word = "\x1b[31m" + word + "\x1b[0m"
			}
		}
		line := "  " + word + " " + reports.Line(res.Probe)
		var notes []string
		if !match {
			notes = append(notes, "expected "+reports.Line(string(exp)))
		}
		if res.Outcome != eff {
			notes = append(notes, "the probe said "+reports.Line(string(res.Outcome)))
		}
		if len(notes) > 0 {
			line += " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintln(w, line)
	}
}

// probeErr splits a harness error the engine wrote for one probe ("probe
// ID: what failed") into the probe and what failed.
var probeErr = regexp.MustCompile(`(?s)^probe (\S+): (.*)$`)

// maxNamedProbes is how many probes a grouped harness error names.
const maxNamedProbes = 5

// causeDepth is how many of an error chain's innermost messages ("doing
// what: cause") name its cause, for grouping.
const causeDepth = 3

// cause is the innermost causeDepth messages of an error chain: the outer
// ones name the sandbox or task it happened in, which differ per probe. A
// ": " inside a quoted string (a box's or a wrapper's words, %q) is part
// of that message, not a link of the chain.
func cause(msg string) string {
	parts := splitChain(msg)
	if len(parts) <= causeDepth {
		return msg
	}
	return strings.Join(parts[len(parts)-causeDepth:], ": ")
}

// splitChain splits an error chain at each ": " outside double quotes
// (a backslash escapes the character after it inside them).
func splitChain(msg string) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ':' && i+1 < len(msg) && msg[i+1] == ' ':
			parts = append(parts, msg[start:i])
			start = i + 2
			i++
		}
	}
	return append(parts, msg[start:])
}

// volatile matches the parts of an error that name one sandbox rather than
// the cause: the harness's sandbox names (sandcheck-RUNID-PROBE), container
// and platform IDs (12 or more hex digits), UUIDs. Errors that differ only
// there are one cause.
var volatile = regexp.MustCompile(`sandcheck-\d{8}t\d{6}-[0-9a-f]{8}(-[a-z0-9][a-z0-9.-]*)?|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{12,64}`)

// harnessLines turns the run's harness errors into the lines to print: one
// cause, once. An engine failure (the engine stopped, an image removed)
// fails every probe after it the same way, each in a sandbox of its own
// name; those errors are one line giving the cause, how many probes it
// cost and the first few, in the order first seen, not one line per probe.
func harnessLines(errs []string) []string {
	type group struct {
		first  string // the first error, whole
		cause  string
		probes []string
		n      int
	}
	var order []*group
	byCause := map[string]*group{}
	for _, e := range errs {
		msg, probe := e, ""
		if m := probeErr.FindStringSubmatch(e); m != nil {
			probe, msg = m[1], m[2]
		}
		c := cause(msg)
		key := volatile.ReplaceAllString(c, "…")
		g := byCause[key]
		if g == nil {
			g = &group{first: e, cause: key}
			byCause[key] = g
			order = append(order, g)
		}
		g.n++
		if probe != "" {
			g.probes = append(g.probes, probe)
		}
	}
	out := make([]string, 0, len(order))
	for _, g := range order {
		switch n := len(g.probes); {
		case g.n == 1:
			out = append(out, g.first)
		case n <= 1:
			out = append(out, fmt.Sprintf("%s (%d times)", g.cause, g.n))
		case n <= maxNamedProbes:
			out = append(out, fmt.Sprintf("%s (%d probes: %s)", g.cause, n, strings.Join(g.probes, ", ")))
		default:
			out = append(out, fmt.Sprintf("%s (%d probes: %s and %d more; every error is in run.json)", g.cause, n, strings.Join(g.probes[:maxNamedProbes], ", "), n-maxNamedProbes))
		}
	}
	return out
}

// printHarnessErrors prints the run's harness errors, each cause once.
func printHarnessErrors(w io.Writer, errs []string) {
	for _, l := range harnessLines(errs) {
		fmt.Fprintf(w, "sandcheck: harness: %s\n", reports.Line(l))
	}
}
