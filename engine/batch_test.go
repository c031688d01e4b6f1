package engine

import (
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// TestCutReports: a batch cut at its budget keeps what reported, names the
// one probe that hung, and marks those after it as never run.
func TestCutReports(t *testing.T) {
	out := runners.ExitResult{ExitCode: -1, Stdout: []byte(
		`{"probe":"a.one","outcome":"blocked","detail":"d"}` + "\n" +
			`{"probe":"a.two","outcome":"escaped","detail":"d"}` + "\n" +
			`{"probe":"a.thr`)} // a line cut short: not a result
	r := cutReports([]string{"a.one", "a.two", "a.three", "a.four"}, out, 40*time.Second)
	if r["a.one"].Outcome != probes.Blocked || r["a.two"].Outcome != probes.Escaped || r["a.one"].hung || r["a.two"].notRun {
		t.Errorf("reported probes lost their results: %+v %+v", r["a.one"], r["a.two"])
	}
	if h := r["a.three"]; !h.hung || h.Outcome != probes.Inconclusive || h.Detail != "probe hung: its task was cut at its budget of 40s (the sum of its probes' timeouts) with this probe unfinished" {
		t.Errorf("hung probe: %+v", h)
	}
	if n := r["a.four"]; !n.notRun || n.Outcome != probes.NotTested || n.Detail != "not run: probe a.three hung the shared batch before it" {
		t.Errorf("probe after the hung one: %+v", n)
	}
	// Garbage before the cut: nothing is trusted, the first probe hung.
	r = cutReports([]string{"a.one", "a.two"}, runners.ExitResult{Stdout: []byte("junk\n")}, time.Second)
	if !r["a.one"].hung || !r["a.two"].notRun {
		t.Errorf("garbage output: %+v", r)
	}
}
