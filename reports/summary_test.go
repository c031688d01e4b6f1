package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probes"
)

// loadRecord reads a stored run.json; with grade, it (re)grades it with
// the embedded policy, as `sandcheck policy eval` would.
func loadRecord(t *testing.T, path string, grade bool) *evidence.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec evidence.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if grade {
		g, err := policies.New()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Verdict, err = g.Grade(context.Background(), &rec); err != nil {
			t.Fatalf("grading %s: %v", path, err)
		}
	}
	return &rec
}

// fullWeak is a whole run of fixtures/targets/weak.yaml on this machine
// (144 probes, 139 escaped), as `sandcheck run` wrote it.
func fullWeak(t *testing.T) *evidence.Record {
	return loadRecord(t, "testdata/full-weak.run.json", false)
}

// The summary of a full weak run, and of the weak record the policy tests
// keep, stays under MaxSummary and still leads with the verdict, the
// totals and the most severe failures with their evidence and fix, names
// every failure it could not show, and gives passing criteria as counts.
func TestSummaryFitsForFullRuns(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  *evidence.Record
	}{
		{"full-weak", fullWeak(t)},
		{"policies-weak", loadRecord(t, "../policies/testdata/weak.run.json", true)},
		{"policies-hardened", loadRecord(t, "../policies/testdata/hardened.run.json", true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := (Markdown{}).Write(&b, c.rec); err != nil {
				t.Fatal(err)
			}
			md := b.String()
			t.Logf("%s: %d bytes, %d results", c.name, len(md), len(c.rec.Results))
			if len(md) >= MaxSummary {
				t.Fatalf("summary is %d bytes, limit %d", len(md), MaxSummary)
			}
			if !strings.HasPrefix(md, "# sandcheck run\n\n**Verdict: ") || !strings.Contains(md, "## Totals by severity") {
				t.Errorf("summary does not lead with the verdict and totals:\n%.400s", md)
			}
			fs := findings(c.rec)
			if c.rec.Verdict.Pass {
				if strings.Contains(md, "## Failures first") {
					t.Error("a passing run shows failures")
				}
				return
			}
			if len(fs) == 0 {
				t.Fatal("a failing fixture has no failed result")
			}
			top := fs[0]
			i := strings.Index(md, "## Failures first")
			j := strings.Index(md, "## Criteria")
			if i < 0 || j < i {
				t.Fatal("failures do not come before the criteria")
			}
			if !strings.Contains(md[i:j], code(top.r.Probe, false)) || !strings.Contains(md[i:j], "**Fix:** "+code(remediation(top.r.Probe), false)) ||
				!strings.Contains(md[i:j], "| What the probe said | What the host saw |") {
				t.Errorf("the most severe failure %s is not shown with evidence and fix", top.r.Probe)
			}
			for _, f := range fs {
				if !strings.Contains(md, code(f.r.Probe, false)) && !strings.Contains(md, "…") {
					t.Errorf("failure %s is neither shown nor named", f.r.Probe)
				}
			}
			for _, cr := range c.rec.Verdict.Criteria {
				if cr.Status == evidence.StatusPass && strings.Contains(md, cell(first(cr.Reasons))) {
					t.Errorf("passing criterion %s lists its reasons instead of counts", cr.ID)
				}
			}
		})
	}
}

// A hostile record with thousands of huge findings still fits.
func TestSummaryBoundedForHugeRecords(t *testing.T) {
	rec := hostileRecord()
	long := strings.Repeat("x|`<", 5000)
	for i := 0; i < 400; i++ {
		r := res("host.honeyfile", "no-host-mount", probes.Escaped, long, host(evidence.SourceRuntime, "mounts", probes.Escaped, long))
		rec.Results = append(rec.Results, r)
		rec.Errors = append(rec.Errors, long)
	}
	rec.Verdict.Criteria[1].Reasons = append(rec.Verdict.Criteria[1].Reasons, strings.Split(strings.Repeat("writable engine socket;", 500), ";")...)
	var b bytes.Buffer
	if err := (Markdown{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	if b.Len() >= MaxSummary {
		t.Fatalf("summary is %d bytes", b.Len())
	}
}

// Every probe in the catalog has remediation text, which the summary, the
// HTML report and SARIF rule help show.
func TestEveryProbeHasRemediation(t *testing.T) {
	for _, s := range probes.Catalog() {
		if len(strings.TrimSpace(s.Remediation)) < 10 {
			t.Errorf("probe %s has no useful remediation: %q", s.ID, s.Remediation)
		}
	}
}

// With $GITHUB_STEP_SUMMARY set, WriteAll appends the summary to it.
func TestStepSummary(t *testing.T) {
	dir := t.TempDir()
	sum := filepath.Join(dir, "step.md")
	if err := os.WriteFile(sum, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", sum)
	if _, err := WriteAll(filepath.Join(dir, "out"), weakRecord(), []string{"markdown"}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(sum)
	md, _ := os.ReadFile(filepath.Join(dir, "out", "summary.md"))
	if string(got) != "earlier step\n"+string(md) {
		t.Errorf("step summary is %q", got)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(dir, "missing", "x.md"))
	if _, err := WriteAll(filepath.Join(dir, "out"), weakRecord(), []string{"markdown"}); err == nil {
		t.Error("an unwritable step summary is not reported")
	}
}
