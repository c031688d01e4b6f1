package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

func TestByName(t *testing.T) {
	for _, f := range []string{"json", "junit", "markdown"} {
		w, err := ByName(f)
		if err != nil {
			t.Fatalf("ByName(%q): %v", f, err)
		}
		if w.Format() != f {
			t.Errorf("ByName(%q).Format() = %q", f, w.Format())
		}
	}
	for _, f := range []string{"", "pdf", "JSON", "md"} {
		if w, err := ByName(f); err == nil {
			t.Errorf("ByName(%q) = %v, want an error", f, w)
		}
	}
}

func TestWritersRefuseNil(t *testing.T) {
	for _, f := range Formats() {
		w, _ := ByName(f)
		if err := w.Write(&bytes.Buffer{}, nil); err == nil {
			t.Errorf("%s wrote a nil record", f)
		}
	}
}

func TestWriteAll(t *testing.T) {
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := WriteAll(dir, weakRecord(), nil)
	if err != nil {
		t.Fatalf("WriteAll: %v", err)
	}
	want := []string{filepath.Join(dir, "run.json"), filepath.Join(dir, "junit.xml"), filepath.Join(dir, "summary.md"),
		filepath.Join(dir, "results.sarif"), filepath.Join(dir, "report.html"), filepath.Join(dir, "risks.json")}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Errorf("dir holds %d entries, want %d (no temporary files left)", len(entries), len(want))
	}

	paths, err = WriteAll(dir, weakRecord(), []string{"junit", "junit"})
	if err != nil || len(paths) != 1 {
		t.Errorf("WriteAll(junit, junit) = %v, %v; want one path", paths, err)
	}
}

func TestWriteAllUnknownFormatWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := WriteAll(dir, weakRecord(), []string{"json", "pdf"}); err == nil {
		t.Fatal("WriteAll accepted an unknown format")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("WriteAll created %s before failing: %v", dir, err)
	}
	if _, err := WriteAll(dir, nil, nil); err == nil {
		t.Error("WriteAll accepted a nil record")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rec := hostileRecord()
	var buf bytes.Buffer
	if err := (JSON{}).Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	var back evidence.Record
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, rec) {
		t.Errorf("run.json does not round-trip:\n got %+v\nwant %+v", back, *rec)
	}
}

func TestJUnitHostileStaysData(t *testing.T) {
	var buf bytes.Buffer
	if err := (JUnit{}).Write(&buf, hostileRecord()); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("hostile record gives invalid XML: %v", err)
	}
	// The criteria suite (12 criteria, 2 failed), then the host suite.
	if doc.Tests != 14 || doc.Failures != 4 || len(doc.Suites) != 2 || len(doc.Suites[1].Cases) != 2 {
		t.Fatalf("unexpected shape: %+v", doc)
	}
	c := doc.Suites[1].Cases[0]
	if c.Failure == nil || !strings.Contains(c.Failure.Body, "</failure>]]><script>") {
		t.Errorf("hostile detail did not survive as text: %+v", c.Failure)
	}
	for _, bad := range []string{"\x00", "\x1b", "\u202e", "\u200b"} {
		if strings.Contains(buf.String(), bad) {
			t.Errorf("output carries %q", bad)
		}
	}
	if c := doc.Suites[1].Cases[1]; c.Name != "host.evil|x" || c.Classname != "made-up</classname>" {
		t.Errorf("forged names changed: %q %q", c.Name, c.Classname)
	}
}

// stripCodeSpans removes well-formed code spans, leaving the text a
// Markdown renderer would interpret.
func stripCodeSpans(t *testing.T, line string) string {
	t.Helper()
	var out strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			out.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		fence := line[i : i+n]
		j := i + n
		for {
			k := strings.Index(line[j:], fence)
			if k < 0 {
				t.Fatalf("unclosed code span in %q", line)
			}
			j += k
			if j+n < len(line) && line[j+n] == '`' { // longer run: not our fence
				for j < len(line) && line[j] == '`' {
					j++
				}
				continue
			}
			break
		}
		i = j + n
	}
	return out.String()
}

func TestMarkdownHostileStaysData(t *testing.T) {
	var buf bytes.Buffer
	if err := (Markdown{}).Write(&buf, hostileRecord()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"\x00", "\x1b", "\u202e", "\u200b", "\r"} {
		if strings.Contains(out, bad) {
			t.Errorf("output carries %q", bad)
		}
	}
	inTable, header := false, 0
	for _, line := range strings.Split(out, "\n") {
		rest := stripCodeSpans(t, line)
		for _, bad := range []string{"script", "@", "http", "evil", "[link]", "<!--", "&amp;", "#1", "head"} {
			if strings.Contains(rest, bad) {
				t.Errorf("%q is outside a code span in line %q", bad, line)
			}
		}
		if strings.HasPrefix(line, "|") {
			// Every table row has as many cells as its header.
			cells := strings.Count(rest, "|") - 1
			if !inTable {
				header, inTable = cells, true
			} else if cells != header {
				t.Errorf("row has %d cells, header %d: %q", cells, header, line)
			}
		} else {
			inTable = false
		}
	}
}

func TestCode(t *testing.T) {
	tests := []struct{ in, table, text string }{
		{"plain", "` plain `", "` plain `"},
		{"a`b", "`` a`b ``", "`` a`b ``"},
		{"``x", "``` ``x ```", "``` ``x ```"},
		{"a|b", "` a¦b `", "` a|b `"},
		{"l1\nl2\r\n", "` l1 l2 `", "` l1 l2 `"},
		{"  ", "", ""},
		{"\u202eevil", "` \uFFFDevil `", "` \uFFFDevil `"},
		{"\xff", "` \uFFFD `", "` \uFFFD `"},
	}
	for _, tt := range tests {
		if got := code(tt.in, true); got != tt.table {
			t.Errorf("code(%q, table) = %q, want %q", tt.in, got, tt.table)
		}
		if got := code(tt.in, false); got != tt.text {
			t.Errorf("code(%q, text) = %q, want %q", tt.in, got, tt.text)
		}
	}
	long := code(strings.Repeat("a", 1000), false)
	if n := len([]rune(long)); n > maxCell+10 {
		t.Errorf("long text not cut: %d runes", n)
	}
}

func TestClassify(t *testing.T) {
	weak := weakRecord()
	want := map[string]state{
		"metadata.aws-imdsv1": stateFail,    // contradiction
		"privilege.root-uid":  stateFail,    // escaped
		"syscalls.bpf":        stateError,   // inconclusive
		"resources.memory":    stateSkipped, // not applicable
		"resources.fork-bomb": statePass,
	}
	for _, v := range []*evidence.Verdict{weak.Verdict, nil} {
		for _, r := range weak.Results {
			if st, _, _ := classify(v, r); st != want[r.Probe] {
				t.Errorf("verdict %v: %s is %s, want %s", v != nil, r.Probe, st, want[r.Probe])
			}
		}
	}
	// A result the verdict fails for a reason the outcome does not show.
	r := res("syscalls.keyctl", "hardened-runtime", probes.Blocked, "")
	v := &evidence.Verdict{Criteria: []evidence.Criterion{{ID: "hardened-runtime", Status: evidence.StatusFail,
		Reasons: []string{`probe syscalls.keyctl claims category "x" but the catalog says "syscalls" (the record may be forged)`}}}}
	if st, msg, _ := classify(v, r); st != stateFail || !strings.Contains(msg, "forged") {
		t.Errorf("forged result shown as %s %q", st, msg)
	}
	// A reason about syscalls.keyctl-2 is not about syscalls.keyctl.
	v.Criteria[0].Reasons = []string{"probe syscalls.keyctl-2 escaped (expected blocked): self-reported: x"}
	if st, _, _ := classify(v, r); st != statePass {
		t.Errorf("reason about another probe counted: %s", st)
	}
	// Disputed (unconfirmed) without inconclusive is an error.
	r = res("workload.compile", "usability", probes.Escaped, "")
	r.Expected = probes.Escaped
	v.Criteria[0] = evidence.Criterion{ID: "usability", Status: evidence.StatusUnconfirmed,
		Reasons: []string{"probe workload.compile reported escaped but runtime/exit shows blocked: killed"}}
	if st, _, _ := classify(v, r); st != stateError {
		t.Errorf("disputed result shown as %s", st)
	}
	// The policy's own "unconfirmed" for a result is never a pass, with
	// or without the criterion's reason beside it.
	r = res("teardown.scratch", "verified-teardown", probes.Blocked, "")
	v = &evidence.Verdict{Results: []evidence.ResultGrade{{Probe: r.Probe, Effective: evidence.Unconfirmed, Expected: probes.Blocked}}}
	if st, msg, _ := classify(v, r); st != stateError || !strings.HasPrefix(msg, "unconfirmed") {
		t.Errorf("an unconfirmed result shown as %s %q", st, msg)
	}
}
