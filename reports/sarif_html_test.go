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
				default: // SARIF §3.27.9: a level other than none only with kind fail
					if r.Level != "none" {
						t.Errorf("result %s: kind %s at level %s", r.RuleID, r.Kind, r.Level)
					}
				}
				if r.Kind == "pass" || r.Kind == "notApplicable" {
					t.Errorf("result %s: kind %s opens an alert for a check that held", r.RuleID, r.Kind)
				}
				if len(r.Locations) != 1 || r.Locations[0].PhysicalLocation.ArtifactLocation.URI == "" || r.Message.Text == "" {
					t.Errorf("result %s: no location or message", r.RuleID)
				}
			}
		})
	}
}

// A weak run's escapes are SARIF failures at the probe's level and its
// unconfirmed results reviews at level none; passes and not-applicable
// results are not in the log at all. Each failure points at the target key
// that decides it, rules carry security-severity and helpUri, and the run
// is named per target.
func TestSARIFOnlyFindings(t *testing.T) {
	rec := weakRecord()
	var b bytes.Buffer
	if err := (SARIF{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	run := log.Runs[0]
	got := map[string]sarifResult{}
	for _, r := range run.Results {
		got[r.RuleID] = r
	}
	want := map[string]struct {
		kind, level string
		line        int
	}{
		"metadata.aws-imdsv1": {"fail", "error", 12},  // docker.network
		"privilege.root-uid":  {"fail", "warning", 8}, // medium; no user key: the criterion's docker.runtime
		"syscalls.bpf":        {"review", "none", 10}, // docker.seccomp
	}
	for id, w := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("%s missing from the log", id)
			continue
		}
		if r.Kind != w.kind || r.Level != w.level || r.Locations[0].PhysicalLocation.Region.StartLine != w.line {
			t.Errorf("%s: kind %s level %s line %d, want %s %s %d", id, r.Kind, r.Level,
				r.Locations[0].PhysicalLocation.Region.StartLine, w.kind, w.level, w.line)
		}
	}
	for _, id := range []string{"resources.memory", "resources.fork-bomb"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s (not applicable / passed) is in the log", id)
		}
	}
	if len(run.Results) != len(want) {
		t.Errorf("%d results, want %d", len(run.Results), len(want))
	}
	if run.AutomationDetails.ID != "sandcheck/weak/run-weak" {
		t.Errorf("automationDetails.id = %q", run.AutomationDetails.ID)
	}
	for _, r := range run.Tool.Driver.Rules {
		if r.Properties["security-severity"] == nil {
			t.Errorf("rule %s has no security-severity", r.ID)
		}
		if r.ID == "metadata.aws-imdsv1" && r.HelpURI != docsURI+"probes.md#metadataaws-imdsv1" {
			t.Errorf("rule %s helpUri %q", r.ID, r.HelpURI)
		}
	}
}

// A record whose target file changed since the run (digest mismatch) or
// is absent points at line 1, never at a wrong line.
func TestSARIFLineOnlyForTheFileThatRan(t *testing.T) {
	rec := weakRecord()
	rec.Target.Digest = "sha256:0000"
	var b bytes.Buffer
	if err := (SARIF{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	for _, r := range log.Runs[0].Results {
		if l := r.Locations[0].PhysicalLocation.Region.StartLine; l != 1 {
			t.Errorf("%s at line %d of a file that is not the one that ran", r.RuleID, l)
		}
	}
}

func TestKeyLine(t *testing.T) {
	src := []byte("name: x\ndocker:\n  # seccomp: commented\n  cap_add: []\n  seccomp: default\nother:\n  memory: 1\n")
	for _, c := range []struct {
		path []string
		want int
	}{
		{[]string{"docker", "seccomp"}, 5},
		{[]string{"docker", "cap_add"}, 4},
		{[]string{"docker", "memory"}, 0},
		{[]string{"other", "memory"}, 7},
		{[]string{"name"}, 1},
		{[]string{"missing"}, 0},
	} {
		if got := keyLine(src, c.path...); got != c.want {
			t.Errorf("keyLine(%v) = %d, want %d", c.path, got, c.want)
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
