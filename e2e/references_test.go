package e2e

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/reports"
)

// matrixReferences are the reference targets scripts/matrix.sh publishes
// (its kinds, in its order: the fixture's file name and the target's
// name, which names its reference result file), each with the exit code
// its verdict gives.
var matrixReferences = []struct {
	target, name string
	code         int
}{
	{"process", "process-control", 1}, {"bwrap-hardened", "bwrap-hardened", 1},
	{"hardened", "hardened-reference", 0}, {"hardened-gvisor", "hardened-reference-gvisor", 0},
	{"wrapper-bwrap", "wrapper-bwrap", 1}, {"wrapper-srt-root", "wrapper-srt-root", 1},
	{"wrapper-srt-user", "wrapper-srt-user", 1}, {"wrapper-srt-strict", "wrapper-srt-strict", 1},
	{"wrapper-firejail", "wrapper-firejail", 1}, {"wrapper-firejail-strict", "wrapper-firejail-strict", 1},
	{"wrapper-firejail-user", "wrapper-firejail-user", 1}, {"wrapper-firejail-strict-user", "wrapper-firejail-strict-user", 1},
	{"wrapper-srt-allow-ip", "wrapper-srt-allow-ip", 1},
}

// TestMatrixListsEveryReference holds the list above to scripts/matrix.sh:
// a column the matrix publishes is a reference this package holds to its
// whole result. It reads only files, so it runs in -short mode.
func TestMatrixListsEveryReference(t *testing.T) {
	b, err := os.ReadFile("../scripts/matrix.sh")
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, m := range regexp.MustCompile(`[a-z-]+:([a-z-]+)\.yaml`).FindAllStringSubmatch(string(b), -1) {
		script = append(script, m[1])
	}
	var listed []string
	for _, r := range matrixReferences {
		listed = append(listed, r.target)
	}
	if !slices.Equal(script, listed) {
		t.Errorf("scripts/matrix.sh runs %v; this package holds %v", script, listed)
	}
	for _, r := range matrixReferences {
		f, err := os.ReadFile("../fixtures/targets/" + r.target + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^name: ` + regexp.QuoteMeta(r.name) + `$`).Match(f) {
			t.Errorf("fixtures/targets/%s.yaml is not named %s", r.target, r.name)
		}
		if _, err := reports.LoadReference("../fixtures/references", r.name); err != nil {
			t.Errorf("%s: %v", r.target, err)
		}
	}
}

// TestReferenceResults runs each reference of the matrix over the whole
// catalog (the package's shared runs: the hardened references' are the
// positive controls' too) and holds it to its reference result file
// (fixtures/references/<target>.yaml: every probe's effective outcome,
// every criterion that does not pass) and to what its fixture's comment
// says it measures (the escaped count and the criteria it fails), so an
// upstream fix or a regression of a wrapper, a runtime or the harness
// shows here as a change, probe by probe.
func TestReferenceResults(t *testing.T) {
	binDir(t)
	ensureAgentAccount(t)
	for _, ref := range matrixReferences {
		t.Run(ref.target, func(t *testing.T) {
			if strings.HasPrefix(ref.target, "wrapper-") {
				requireWrapperTools(t)
			}
			want, err := reports.LoadReference("../fixtures/references", ref.name)
			if err != nil {
				t.Fatal(err)
			}
			r := sharedRun(t, ref.target+".yaml", false)
			rec := r.mustRecord(t)
			if r.code != ref.code {
				t.Errorf("exit code %d, want %d\n%s\n%s", r.code, ref.code, r.stdout, r.stderr)
			}
			if len(rec.Errors) > 0 {
				t.Errorf("harness errors: %v", rec.Errors)
			}
			holdReference(t, rec, want)
			holdComment(t, rec, "../fixtures/targets/"+ref.target+".yaml", want)
		})
	}
}

// holdReference checks every catalog probe's effective outcome and every
// criterion's status against the reference.
func holdReference(t *testing.T, rec *evidence.Record, want *reports.Reference) {
	t.Helper()
	got := map[string]int{}
	for i, r := range rec.Results {
		got[r.Probe] = i
	}
	for _, s := range probes.Catalog() {
		i, ok := got[s.ID]
		if !ok {
			t.Errorf("%s: no result", s.ID)
			continue
		}
		r := rec.Results[i]
		if eff, allowed := rec.Effective(i), want.Allowed(s.ID); !slices.Contains(allowed, eff) {
			why := want.Inconclusive[s.ID]
			t.Errorf("%s on %s: effective %s (reported %s: %s), the reference gives %v%s: a fix or a regression; update fixtures/references/%s.yaml and the fixture's comment if it holds",
				s.ID, rec.Target.Name, eff, r.Outcome, r.Detail, allowed, orWhy(why), rec.Target.Name)
		}
	}
	for p := range want.Outcomes {
		if _, ok := got[p]; !ok {
			t.Errorf("the reference lists %s, which the run has no result for", p)
		}
	}
	for p := range want.Inconclusive {
		if _, ok := got[p]; !ok {
			t.Errorf("the reference explains %s, which the run has no result for", p)
		}
	}
	if rec.Verdict == nil {
		t.Fatal("no verdict")
	}
	seen := map[string]bool{}
	for _, c := range rec.Verdict.Criteria {
		seen[c.ID] = true
		w := want.Criteria[c.ID]
		if w == "" {
			w = evidence.StatusPass
		}
		if c.Status != w {
			t.Errorf("criterion %s on %s: %s, the reference gives %s (%s)", c.ID, rec.Target.Name, c.Status, w, strings.Join(c.Reasons, "; "))
		}
	}
	for c := range want.Criteria {
		if !seen[c] {
			t.Errorf("the reference gives criterion %s, which the verdict does not grade", c)
		}
	}
}

func orWhy(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

// measuredLine is the fixture comment's summary of its whole-catalog
// result: "Measured over the whole catalog (...): N escaped; fails a, b
// (why), c." or "...: N escaped; passes.", over any number of comment
// lines.
var measuredLine = regexp.MustCompile(`Measured over the whole catalog \([^)]*\): (\d+) escaped; (passes|fails ((?:[^.(]|\([^)]*\))*))\.`)

// commentAside is a parenthesis of the comment, and commentList the
// separators of its list of criteria.
var (
	commentAside = regexp.MustCompile(`\([^)]*\)`)
	commentList  = regexp.MustCompile(`,\s*(?:and\s+)?|\s+and\s+`)
)

// holdComment checks what the fixture's comment says it measures: the
// escaped count (give or take the probes the reference lets vary) and
// the criteria it fails, which must be the reference's.
func holdComment(t *testing.T, rec *evidence.Record, fixture string, want *reports.Reference) {
	t.Helper()
	n, said, err := commentSummary(fixture)
	if err != nil {
		t.Fatal(err)
	}
	escaped, varying := 0, 0
	for i := range rec.Results {
		if rec.Effective(i) == probes.Escaped {
			escaped++
		}
	}
	for _, o := range want.Outcomes {
		if strings.Contains(o, "|") && strings.Contains(o, string(probes.Escaped)) {
			varying++
		}
	}
	if escaped < n-varying || escaped > n+varying {
		t.Errorf("%s: its comment says %d escaped, the run gives %d (%d probes may vary)", fixture, n, escaped, varying)
	}
	if fails := referenceFails(want); !slices.Equal(said, fails) {
		t.Errorf("%s: its comment says it fails %v, its reference (and the run) %v", fixture, said, fails)
	}
}

// TestReferenceCommentsAgree holds each matrix fixture's comment to its
// reference result file: the criteria it says the target fails are the
// file's, and its escaped count is the file's (give or take the probes
// the file lets vary). It reads only files, so it runs in -short mode.
func TestReferenceCommentsAgree(t *testing.T) {
	for _, r := range matrixReferences {
		fixture := "../fixtures/targets/" + r.target + ".yaml"
		n, said, err := commentSummary(fixture)
		if err != nil {
			t.Error(err)
			continue
		}
		want, err := reports.LoadReference("../fixtures/references", r.name)
		if err != nil {
			t.Error(err)
			continue
		}
		if fails := referenceFails(want); !slices.Equal(said, fails) {
			t.Errorf("%s: its comment says it fails %v, fixtures/references/%s.yaml %v", fixture, said, r.name, fails)
		}
		lo, hi := 0, 0
		for _, o := range want.Outcomes {
			if o == string(probes.Escaped) {
				lo++
			}
			if strings.Contains(o, string(probes.Escaped)) {
				hi++
			}
		}
		if n < lo || n > hi {
			t.Errorf("%s: its comment says %d escaped, fixtures/references/%s.yaml %d to %d", fixture, n, r.name, lo, hi)
		}
	}
}

// commentSummary reads the fixture comment's measured summary: the
// escaped count and the criteria it fails, sorted.
func commentSummary(fixture string) (int, []string, error) {
	b, err := os.ReadFile(fixture)
	if err != nil {
		return 0, nil, err
	}
	m := measuredLine.FindStringSubmatch(commentText(b))
	if m == nil {
		return 0, nil, fmt.Errorf("%s: its comment has no %q summary", fixture, "Measured over the whole catalog (...): N escaped; fails ... .")
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, nil, fmt.Errorf("%s: escaped count %q: %w", fixture, m[1], err)
	}
	said := []string{}
	if m[2] != "passes" {
		for _, c := range commentList.Split(commentAside.ReplaceAllString(m[3], ""), -1) {
			if c = strings.TrimSpace(c); c != "" {
				said = append(said, c)
			}
		}
	}
	sort.Strings(said)
	return n, said, nil
}

// referenceFails is the criteria a reference fails, sorted.
func referenceFails(ref *reports.Reference) []string {
	fails := []string{}
	for c, s := range ref.Criteria {
		if s == evidence.StatusFail {
			fails = append(fails, c)
		}
	}
	sort.Strings(fails)
	return fails
}

// commentText is a YAML file's comment lines joined into one text.
func commentText(b []byte) string {
	var comment []string
	for _, l := range strings.Split(string(b), "\n") {
		if c, ok := strings.CutPrefix(l, "#"); ok {
			comment = append(comment, strings.TrimSpace(c))
		}
	}
	return strings.Join(comment, " ")
}
