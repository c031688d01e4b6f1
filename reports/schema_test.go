package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles a JSON Schema file kept in the repository.
func compileSchema(t *testing.T, path string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "file://" + filepath.ToSlash(path)
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compiling %s: %v", path, err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing output: %v", err)
	}
	return s.Validate(v)
}

// Every fixture's SARIF log is valid against the official SARIF 2.1.0
// schema (testdata/sarif-schema-2.1.0.json, from the OASIS sarif-spec
// repository's Documents/CommitteeSpecifications/2.1.0), formats asserted.
func TestSARIFValidAgainstOfficialSchema(t *testing.T) {
	s := compileSchema(t, "testdata/sarif-schema-2.1.0.json")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := (SARIF{}).Write(&b, c.rec()); err != nil {
				t.Fatal(err)
			}
			if err := validate(t, s, b.Bytes()); err != nil {
				t.Errorf("SARIF of %s is not valid: %v", c.name, err)
			}
		})
	}
	// The schema does reject what the spec forbids: a log without runs.
	bad, _ := json.Marshal(map[string]any{"version": "2.1.0"})
	if err := validate(t, s, bad); err == nil {
		t.Error("the schema accepts a log without runs: it validates nothing")
	}
}

// The SARIF log of a full weak run of this machine is valid against the
// official schema too, and holds only findings: no result for the 5
// not-applicable probes or for anything that held.
func TestSARIFOfFullWeakRun(t *testing.T) {
	s := compileSchema(t, "testdata/sarif-schema-2.1.0.json")
	rec := fullWeak(t)
	// From the repository's root the record's target file is found, and it
	// is still the one that ran, so results point at its lines.
	t.Chdir("..")
	var b bytes.Buffer
	if err := (SARIF{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	if err := validate(t, s, b.Bytes()); err != nil {
		t.Fatalf("not valid: %v", err)
	}
	var log sarifLog
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	probeResults, lines := 0, map[int]int{}
	for _, r := range log.Runs[0].Results {
		if r.Kind != "fail" && r.Kind != "review" {
			t.Errorf("%s: kind %s", r.RuleID, r.Kind)
		}
		if !strings.HasPrefix(r.RuleID, "criterion.") {
			probeResults++
		}
		lines[r.Locations[0].PhysicalLocation.Region.StartLine]++
	}
	if want := len(findings(rec)); probeResults != want {
		t.Errorf("%d probe results in SARIF, %d findings in the record", probeResults, want)
	}
	if len(lines) < 5 {
		t.Errorf("results on %d distinct lines of the target file: %v", len(lines), lines)
	}
	if n := len(log.Runs[0].Results) - probeResults; n > 100 {
		t.Errorf("%d criterion results: the same finding per sandbox is not one alert", n)
	}
	t.Logf("%d results (%d about probes) on %d distinct lines of %s, %d bytes", len(log.Runs[0].Results), probeResults, len(lines), rec.Target.Path, b.Len())
}
