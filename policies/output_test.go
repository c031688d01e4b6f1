package policies

import (
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
)

// The output probes' outcome comes from the host's view of the release:
// the probe's own "blocked" never passes, a withheld artifact is blocked, a
// released one escaped, a target without an output folder not-applicable.
func TestOutputProbesAreDecidedByTheHost(t *testing.T) {
	g := newGrader(t)
	const id = "output.eicar"
	item := func(kind string, o probes.Outcome) evidence.Item {
		return evidence.Item{Source: evidence.SourceOutput, Kind: kind, Summary: kind, Indicates: o}
	}
	for _, tc := range []struct {
		name   string
		self   probes.Outcome
		host   []evidence.Item
		want   probes.Outcome
		status string
	}{
		{"self-reported blocked, no release", probes.Blocked, nil, probes.Inconclusive, evidence.StatusUnconfirmed},
		{"self-reported blocked, artifact missing", probes.Blocked, []evidence.Item{item("output-missing", "")}, probes.Inconclusive, evidence.StatusUnconfirmed},
		{"withheld by the gate", probes.Inconclusive, []evidence.Item{item("output-withheld", probes.Blocked)}, probes.Blocked, evidence.StatusPass},
		{"released unflagged", probes.Blocked, []evidence.Item{item("output-released", probes.Escaped)}, probes.Escaped, evidence.StatusFail},
		{"self-reported escape", probes.Escaped, nil, probes.Escaped, evidence.StatusFail},
		{"no output folder", probes.NotApplicable, []evidence.Item{item("output-undeclared", "")}, probes.NotApplicable, evidence.StatusPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := hardenedRecord()
			r := result(rec, id)
			r.Outcome = tc.self
			r.Evidence = append(r.Evidence[:1], tc.host...)
			v := grade(t, g, rec)
			for _, rg := range v.Results {
				if rg.Probe == id && rg.Effective != tc.want {
					t.Errorf("effective %s, want %s", rg.Effective, tc.want)
				}
			}
			if c := criterion(t, v, "controlled-output"); c.Status != tc.status {
				t.Errorf("controlled-output %s, want %s (reasons %q)", c.Status, tc.status, c.Reasons)
			}
		})
	}
}

// A bind release that handed out a flagged artifact fails controlled output
// on its own.
func TestOutputBindReleaseOfFlaggedArtifactFails(t *testing.T) {
	rec := hardenedRecord()
	rec.Outputs = []evidence.OutputRelease{{Token: "t", Release: &output.Release{Mode: output.ModeBind, Source: "folder",
		Artifacts: []output.Artifact{{Path: "x.com", Kind: output.KindFile, Flags: []string{output.FlagEICAR}, Released: true}}}}}
	c := criterion(t, grade(t, newGrader(t), rec), "controlled-output")
	want := "the bind release handed out x.com (file) as-is, flagged eicar"
	if c.Status != evidence.StatusFail || !contains(c.Reasons, want) {
		t.Errorf("controlled-output %s %q, want fail with %q", c.Status, c.Reasons, want)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
