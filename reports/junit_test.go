package reports

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// junitOf writes rec as JUnit and parses it back.
func junitOf(t *testing.T, rec *evidence.Record) junitSuites {
	t.Helper()
	var b bytes.Buffer
	if err := (JUnit{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("parsing the JUnit back: %v", err)
	}
	return doc
}

// A failed criterion with no failing probe behind it (a writable engine
// socket seen only by the runtime's view) is a <failure>, so the test view
// is red exactly when the verdict fails; and the counts add up.
func TestJUnitCriterionFailureWithoutProbe(t *testing.T) {
	rec := hardenedRecord()
	rec.Verdict.Pass = false
	for i, c := range rec.Verdict.Criteria {
		if c.ID == "no-host-mount" {
			rec.Verdict.Criteria[i] = evidence.Criterion{ID: c.ID, Status: evidence.StatusFail,
				Reasons: []string{"runtime view: the engine socket /var/run/docker.sock is mounted writable"}}
		}
	}
	doc := junitOf(t, rec)
	if doc.Failures != 1 {
		t.Fatalf("failures = %d, want 1 (the criterion)", doc.Failures)
	}
	var got *junitCase
	for _, s := range doc.Suites {
		for i, c := range s.Cases {
			if s.Name == "criteria" && c.Name == "no-host-mount" {
				got = &s.Cases[i]
			}
		}
	}
	if got == nil || got.Failure == nil || got.Failure.Message == "" {
		t.Fatalf("criterion no-host-mount is no failure: %+v", got)
	}
}

// For every fixture, the JUnit counts agree with the verdict: red (a
// failure or error) exactly when the verdict fails, and per suite the counts
// equal the cases of each kind. Not applicable and not tested are skipped.
func TestJUnitCountsAgreeWithVerdict(t *testing.T) {
	withNotTested := func() *evidence.Record {
		rec := hardenedRecord()
		r := res("egress.icmp", "default-deny-egress", outcomeNotTested, "the runner has no network to test")
		rec.Results = append(rec.Results, r)
		return rec
	}
	all := append([]struct {
		name string
		rec  func() *evidence.Record
	}{}, cases...)
	all = append(all, struct {
		name string
		rec  func() *evidence.Record
	}{"not-tested", withNotTested})
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			rec := c.rec()
			doc := junitOf(t, rec)
			tests, fails, errs, skips := 0, 0, 0, 0
			for _, s := range doc.Suites {
				f, e, k := 0, 0, 0
				for _, tc := range s.Cases {
					switch {
					case tc.Failure != nil:
						f++
					case tc.Error != nil:
						e++
					case tc.Skipped != nil:
						k++
					}
				}
				if s.Tests != len(s.Cases) || s.Failures != f || s.Errors != e || s.Skipped != k {
					t.Errorf("suite %s counts %d/%d/%d/%d, cases say %d/%d/%d/%d", s.Name, s.Tests, s.Failures, s.Errors, s.Skipped, len(s.Cases), f, e, k)
				}
				tests, fails, errs, skips = tests+s.Tests, fails+f, errs+e, skips+k
			}
			if doc.Tests != tests || doc.Failures != fails || doc.Errors != errs || doc.Skipped != skips {
				t.Errorf("document counts %+v do not add up", doc)
			}
			if rec.Verdict != nil && rec.Verdict.Pass == (fails+errs > 0) {
				t.Errorf("verdict pass=%v but %d failures and %d errors", rec.Verdict.Pass, fails, errs)
			}
			for _, s := range doc.Suites {
				for _, tc := range s.Cases {
					for _, r := range rec.Results {
						if r.Probe == tc.Name && (r.Outcome == probes.NotApplicable || r.Outcome == outcomeNotTested) && tc.Skipped == nil {
							t.Errorf("%s (%s) is not skipped", r.Probe, r.Outcome)
						}
					}
				}
			}
		})
	}
}
