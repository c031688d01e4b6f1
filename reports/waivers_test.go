package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// A waived escape is shown as accepted risk (skipped, with the waiver), and
// the summary lists every applied and expired waiver and the warnings.
func TestWaiversShown(t *testing.T) {
	rec := hardenedRecord()
	r := res("syscalls.bpf", "hardened-runtime", probes.Escaped, "EINVAL")
	rec.Results = append(rec.Results, r)
	reason := "probe syscalls.bpf escaped (expected blocked): self-reported: EINVAL [waived by w.yaml:3: owner sec, expires 2030-06-30: pilot]"
	rec.Verdict.Criteria = criteria(evidence.Criterion{ID: "hardened-runtime", Status: evidence.StatusWaived, Reasons: []string{reason}})
	rec.Verdict.Waivers = []evidence.WaiverUse{{ID: "w.yaml:3", Criterion: "hardened-runtime", Target: "hardened",
		Owner: "sec", Reason: "pilot", Expires: "2030-06-30", Waived: []string{"x"}}}
	rec.Verdict.ExpiredWaivers = []evidence.WaiverUse{{ID: "w.yaml:9", Probe: "metadata.*", Target: "hardened",
		Owner: "sre", Reason: "old", Expires: "2020-01-31"}}
	rec.Verdict.Warnings = []string{"criterion usability was not tested: no probe results"}

	st, msg, _ := classify(rec.Verdict, r)
	if st != stateSkipped || msg != reason {
		t.Errorf("waived result: %s %q, want skipped with the waived reason", st, msg)
	}
	var b bytes.Buffer
	if err := (Markdown{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"## Applied waivers", "w.yaml:3", "## Expired waivers (no longer applied)", "w.yaml:9",
		"## Warnings", "1 waived; 1 warnings"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}
