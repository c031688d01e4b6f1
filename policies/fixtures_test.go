package policies

import (
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

const testProfile = "high-risk-code"

// hostItem turns a catalog host hint ("canary:metadata", "honeyfile") into a
// host-observed evidence item.
func hostItem(hint string, indicates probes.Outcome) evidence.Item {
	source, kind, ok := strings.Cut(hint, ":")
	if !ok {
		source, kind = evidence.SourceCanary, hint
	}
	return evidence.Item{Source: source, Kind: kind, Summary: "host saw " + string(indicates), Indicates: indicates}
}

// hardenedRecord is what a run against a hardened target records: every
// probe in the catalog blocked, confirmed from the host where it can be.
func hardenedRecord() *evidence.Record {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &evidence.Record{
		Schema:     evidence.Schema,
		RunID:      "run-test",
		StartedAt:  start,
		FinishedAt: start.Add(time.Minute),
		Target:     evidence.Target{Name: "hardened", Profile: testProfile},
		Runner:     "docker",
		Runtime:    "runsc",
	}
	for _, s := range probes.Catalog() {
		r := evidence.Result{
			Probe:     s.ID,
			Category:  s.Category,
			Criterion: s.Criterion,
			Severity:  s.Severity,
			Outcome:   probes.Blocked,
			Expected:  s.Expected(testProfile),
			Detail:    "stopped",
			Evidence:  []evidence.Item{{Source: evidence.SourceProbe, Kind: "errno", Summary: "EPERM"}},
		}
		for _, h := range s.Host {
			r.Evidence = append(r.Evidence, hostItem(h, probes.Blocked))
		}
		rec.Results = append(rec.Results, r)
	}
	return rec
}

// result returns a pointer to the first result of probe id in rec.
func result(rec *evidence.Record, id string) *evidence.Result {
	for i := range rec.Results {
		if rec.Results[i].Probe == id {
			return &rec.Results[i]
		}
	}
	panic("no result for " + id)
}

// firstProbeOf returns the first catalog probe testing criterion.
func firstProbeOf(criterion string) (probes.Spec, bool) {
	for _, s := range probes.Catalog() {
		if s.Criterion == criterion {
			return s, true
		}
	}
	return probes.Spec{}, false
}

// largeRecord has about n results (the catalog repeated) for benchmarks.
func largeRecord(n int) *evidence.Record {
	rec := hardenedRecord()
	base := rec.Results
	for len(rec.Results) < n {
		rec.Results = append(rec.Results, base...)
	}
	rec.Results = rec.Results[:n]
	return rec
}
