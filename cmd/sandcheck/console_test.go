package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// In a CI log (not a terminal) the console prints nothing per probe as it
// finishes unless verbose, and then the probe's claim with no mark of the
// expectation (host evidence may overrule it); nothing when quiet.
func TestConsoleProgress(t *testing.T) {
	ok := evidence.Result{Probe: "host.a", Outcome: probes.Blocked, Expected: probes.Blocked}
	bad := evidence.Result{Probe: "host.b", Outcome: probes.Escaped, Expected: probes.Blocked}
	for _, tc := range []struct {
		name           string
		verbose, quiet bool
		want           []string
	}{
		{"ci", false, false, nil},
		{"verbose", true, false, []string{"[ 1/12]    1.2s blocked        host.a", "[ 2/12]    3.5s escaped        host.b"}},
		{"quiet", false, true, nil},
	} {
		var b bytes.Buffer
		p := newConsole(&b, tc.verbose, tc.quiet).progress()
		p(1, 12, ok, 1200*time.Millisecond)
		p(2, 12, bad, 3500*time.Millisecond)
		out := b.String()
		if strings.Contains(out, "\x1b[") {
			t.Errorf("%s: colour escapes outside a terminal: %q", tc.name, out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" {
			lines = nil
		}
		if len(lines) != len(tc.want) {
			t.Fatalf("%s: %d lines %q, want %d", tc.name, len(lines), out, len(tc.want))
		}
		for i, w := range tc.want {
			if strings.Join(strings.Fields(lines[i]), " ") != strings.Join(strings.Fields(w), " ") {
				t.Errorf("%s: line %q, want %q", tc.name, lines[i], w)
			}
		}
	}
}

// After grading the console names each result whose graded outcome is not
// what the profile expects, with the probe's claim where host evidence
// overruled it; a run whose results all hold prints no such line.
func TestPrintGraded(t *testing.T) {
	rec := &evidence.Record{
		Results: []evidence.Result{
			{Probe: "host.a", Outcome: probes.Blocked, Expected: probes.Blocked},
			{Probe: "egress.b", Outcome: probes.Blocked, Expected: probes.Blocked},
			{Probe: "output.c", Outcome: probes.Inconclusive, Expected: probes.Blocked},
		},
		Verdict: &evidence.Verdict{Results: []evidence.ResultGrade{
			{Probe: "host.a", Effective: probes.Blocked, Expected: probes.Blocked},
			{Probe: "egress.b", Effective: probes.Escaped, Expected: probes.Blocked},
			{Probe: "output.c", Effective: probes.Blocked, Expected: probes.Blocked},
		}},
	}
	var b bytes.Buffer
	printGraded(&b, rec, false, false)
	out := b.String()
	want := "escaped egress.b (expected blocked; the probe said blocked)"
	if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	if strings.Contains(out, "host.a") || strings.Contains(out, "output.c") {
		t.Errorf("results graded as expected are listed:\n%s", out)
	}

	b.Reset()
	rec.Verdict.Results[1].Effective = probes.Blocked
	printGraded(&b, rec, false, false)
	if b.Len() != 0 {
		t.Errorf("a run whose results all hold printed:\n%s", b.String())
	}
	b.Reset()
	printGraded(&b, rec, true, false)
	if got := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(got, "blocked output.c (the probe said inconclusive)") || strings.Contains(got, "expected") {
		t.Errorf("verbose: every result, the overruled claim named, no expectation mark:\n%s", b.String())
	}
}
