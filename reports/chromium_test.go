package reports

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium returns Debian's headless browser, or skips with the reason.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missingTool(t, "neither chromium nor google-chrome is installed (apt-get install chromium; scripts/setup.sh installs it on Debian): the HTML report is not rendered")
	return ""
}

// missingTool skips the test for a tool this machine lacks, and fails it
// under CI=true: CI's setup installs every tool, so a skip there would hide
// the test that did not run.
func missingTool(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", why)
	}
	t.Skip(why)
}

// artifactDir is where rendering tests keep their screenshots:
// $SANDCHECK_TEST_ARTIFACTS, else a folder in the temporary directory.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("SANDCHECK_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sandcheck-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// render runs headless Chromium on a local file with its console logged to
// stderr; it returns what Chromium printed (stdout: the DOM with dumpDOM).
func render(t *testing.T, bin, page string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(argv, "file://"+page)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// consoleErrors picks the page's console messages and security refusals
// out of Chromium's log.
func consoleErrors(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Refused to") || strings.Contains(l, "Uncaught") {
			out = append(out, l)
		}
	}
	return out
}

// The HTML report of a full weak run (144 probes) renders in headless
// Chromium with no console error or refused load (it is self-contained
// under its content security policy), its DOM holds the verdict, the three
// charts and the failures before the criteria, and a screenshot is kept.
// The check for console errors is itself checked: a page with an inline
// script, which the policy forbids, is caught.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := (HTML{}).Write(&b, fullWeak(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	dom, log := render(t, bin, page, "--dump-dom")
	if errs := consoleErrors(log); len(errs) > 0 {
		t.Errorf("console errors rendering the report:\n%s", strings.Join(errs, "\n"))
	}
	for _, want := range []string{"Verdict: FAIL", `aria-label="Criteria at a glance"`, `aria-label="Outcomes by category"`,
		`aria-label="Timing"`, "What the host saw", "Fix:", "Residual risks", "Digests"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if i, j := strings.Index(dom, "Failures first"), strings.Index(dom, "<h2>Criteria</h2>"); i < 0 || j < i {
		t.Errorf("failures do not come first (at %d, criteria at %d)", i, j)
	}

	shot := filepath.Join(artifactDir(t), "report-full-weak.png")
	_, log = render(t, bin, page, "--window-size=1280,2400", "--screenshot="+shot)
	st, err := os.Stat(shot)
	if err != nil || st.Size() < 10_000 {
		t.Fatalf("no screenshot at %s (%v)\n%s", shot, err, log)
	}
	t.Logf("screenshot kept at %s (%d bytes)", shot, st.Size())

	bad := filepath.Join(dir, "bad.html")
	forbidden := strings.Replace(b.String(), "</body>", "<script>console.error('x')</script></body>", 1)
	if err := os.WriteFile(bad, []byte(forbidden), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log := render(t, bin, bad, "--dump-dom"); len(consoleErrors(log)) == 0 {
		t.Errorf("a page with a forbidden inline script shows no console error: the check sees nothing\n%s", log)
	}
}

// The history and comparison pages render without console errors too.
func TestHistoryAndComparePagesRenderInChromium(t *testing.T) {
	bin := chromium(t)
	runs := []Stored{{"weak/run.json", fullWeak(t)}, {"hardened/run.json", hardenedRecord()}, {"weak-fixture/run.json", weakRecord()}}
	dir := t.TempDir()
	var hist, cmp bytes.Buffer
	if err := WriteHistoryHTML(&hist, History(runs)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&cmp, Compare(runs)); err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string][]byte{"history.html": hist.Bytes(), "compare.html": cmp.Bytes()} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		dom, log := render(t, bin, path, "--dump-dom")
		if errs := consoleErrors(log); len(errs) > 0 {
			t.Errorf("%s: console errors:\n%s", name, strings.Join(errs, "\n"))
		}
		if !strings.Contains(dom, "<table>") || !strings.Contains(dom, "weak-reference") {
			t.Errorf("%s: rendered DOM lacks the table", name)
		}
	}
}

// TestPrintedReportHoldsEveryResult prints the report of a stored weak run
// to PDF in headless Chromium, as an auditor saves it, and requires the
// PDF's text (pdftotext) to name every probe of the record and every reason
// of every criterion: print styles must not hide the collapsed sections.
func TestPrintedReportHoldsEveryResult(t *testing.T) {
	bin := chromium(t)
	pdftotext, err := exec.LookPath("pdftotext")
	if err != nil {
		missingTool(t, "pdftotext is not installed (apt-get install poppler-utils; scripts/setup.sh installs it): the printed report is not read")
	}
	rec := fullWeak(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := (HTML{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pdf := filepath.Join(artifactDir(t), "report-full-weak.pdf")
	_, log := render(t, bin, page, "--no-pdf-header-footer", "--print-to-pdf="+pdf)
	if st, err := os.Stat(pdf); err != nil || st.Size() < 10_000 {
		t.Fatalf("no PDF at %s (%v)\n%s", pdf, err, log)
	}
	out, err := exec.Command(pdftotext, "-raw", pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	// Text wraps at line ends and hyphens: compare with white space removed.
	text := strings.Join(strings.Fields(string(out)), "")
	var missing []string
	for _, r := range rec.Results {
		if !strings.Contains(text, r.Probe) {
			missing = append(missing, r.Probe)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the printed report names %d of %d probes; missing: %s", len(rec.Results)-len(missing), len(rec.Results), strings.Join(capList(missing, 10), ", "))
	}
	reasons, lost := 0, 0
	for _, c := range rec.Verdict.Criteria {
		for _, r := range c.Reasons {
			reasons++
			words := strings.Fields(r)
			if len(words) > 6 {
				words = words[:6]
			}
			if !strings.Contains(text, strings.Join(words, "")) {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Errorf("the printed report lacks %d of %d criterion reasons", lost, reasons)
	}
	t.Logf("PDF kept at %s: %d probes, %d criterion reasons", pdf, len(rec.Results), reasons)
}
