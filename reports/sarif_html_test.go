package reports

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The SARIF log is structurally what code-scanning services accept: version
// 2.1.0, every result names a rule by ID and by its index, with a level and
// kind from the spec's enumerations and a location; failed results carry the
// probe's severity as level.
func TestSARIFStructure(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := (SARIF{}).Write(&b, c.rec()); err != nil {
				t.Fatal(err)
			}
			var log sarifLog
			dec := json.NewDecoder(&b)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&log); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if log.Version != "2.1.0" || len(log.Runs) != 1 || log.Runs[0].Tool.Driver.Name != "sandcheck" {
				t.Fatalf("log header %q, %d runs", log.Version, len(log.Runs))
			}
			run := log.Runs[0]
			ids := map[string]bool{}
			for _, r := range run.Tool.Driver.Rules {
				if ids[r.ID] || r.ID == "" || r.ShortDescription.Text == "" {
					t.Errorf("rule %+v: duplicate or empty", r)
				}
				ids[r.ID] = true
			}
			for _, r := range run.Results {
				if r.RuleIndex < 0 || r.RuleIndex >= len(run.Tool.Driver.Rules) || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID {
					t.Errorf("result %s: ruleIndex %d does not name its rule", r.RuleID, r.RuleIndex)
				}
				if !slices.Contains([]string{"none", "note", "warning", "error"}, r.Level) ||
					!slices.Contains([]string{"pass", "fail", "review", "notApplicable", "open", "informational"}, r.Kind) {
					t.Errorf("result %s: level %q kind %q outside SARIF's enumerations", r.RuleID, r.Level, r.Kind)
				}
				switch r.Kind {
				case "fail":
					if r.Level == "none" {
						t.Errorf("result %s: a failure at level none", r.RuleID)
					}
				case "pass", "notApplicable":
					if r.Level != "none" {
						t.Errorf("result %s: kind %s at level %s", r.RuleID, r.Kind, r.Level)
					}
				}
				if len(r.Locations) != 1 || r.Locations[0].PhysicalLocation.ArtifactLocation.URI == "" || r.Message.Text == "" {
					t.Errorf("result %s: no location or message", r.RuleID)
				}
			}
		})
	}
}

// A weak run's escapes are SARIF failures at error level; every result of
// the record is there.
func TestSARIFWeakFails(t *testing.T) {
	rec := weakRecord()
	var b bytes.Buffer
	if err := (SARIF{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	fails := 0
	probesSeen := map[string]bool{}
	for _, r := range log.Runs[0].Results {
		if r.Kind == "fail" && r.Level == "error" {
			fails++
		}
		probesSeen[r.RuleID] = true
	}
	if fails == 0 {
		t.Errorf("a weak record gives no failing SARIF result:\n%s", b.String())
	}
	for _, r := range rec.Results {
		if !probesSeen[r.Probe] {
			t.Errorf("result %s missing from the SARIF log", r.Probe)
		}
	}
}

// Hostile text from the record never becomes markup in the HTML page.
func TestHTMLEscapesHostileText(t *testing.T) {
	for _, c := range cases {
		var b bytes.Buffer
		if err := (HTML{}).Write(&b, c.rec()); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		for _, bad := range []string{"<script", "javascript:", "\x1b", "\u202e"} {
			if strings.Contains(strings.ToLower(page), bad) {
				t.Errorf("%s: the page contains %q", c.name, bad)
			}
		}
		if !strings.Contains(page, "Content-Security-Policy") {
			t.Errorf("%s: the page has no content security policy", c.name)
		}
	}
}
