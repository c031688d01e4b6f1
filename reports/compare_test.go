package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// The remote runners (opensandbox, gateway, command) stand beside the local
// kinds, after them, each column named by the runner its run.json records,
// with how the harness reached it; their host kernel is the harness's and
// no tracer watched them, and both pages say so.
func TestCompareRemoteRunners(t *testing.T) {
	mk := func(runner, runtime, target string, start float64) *evidence.Record {
		rec := weakRecord()
		rec.Runner, rec.Runtime, rec.Target.Name, rec.RunID = runner, runtime, target, "run-"+target
		rec.Sandboxes = []evidence.Sandbox{{ID: target + "-1", StartSeconds: start}}
		rec.Tracer = &evidence.Tracer{Status: "on", HostSyscalls: []string{"read", "write"}, Sandboxes: []evidence.TracedSandbox{{ID: target + "-1"}}}
		if runner == "opensandbox" || runner == "gateway" || runner == "command" {
			// What a remote run records: the host's tracer saw none of
			// the platform's sandboxes.
			rec.Tracer = &evidence.Tracer{Status: "partial"}
		}
		return rec
	}
	dir := storeRuns(t,
		mk("command", "", "command-docker", 0.7),
		mk("opensandbox", "", "opensandbox-hardened", 3.1),
		mk("docker", "runsc", "hardened-gvisor", 1.2),
		mk("gateway", "", "gateway-hardened", 2.2),
		mk("bwrap", "", "bwrap", 0.05),
		mk("process", "", "process", 0.01),
		mk("docker", "runc", "hardened", 0.9),
	)
	runs, err := LoadRecords([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(runs)
	var kinds []string
	for _, col := range c.Columns {
		kinds = append(kinds, col.Kind)
	}
	want := []string{"process", "bwrap", "docker/runc", "docker/runsc", "opensandbox", "gateway", "command"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("columns %v, want %v", kinds, want)
	}
	var md, page bytes.Buffer
	if err := WriteCompareMarkdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(md.String(), "\n")
	row := func(label string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+label+" |") {
				return l
			}
		}
		t.Fatalf("no %q row in:\n%s", label, md.String())
		return ""
	}
	if r := row("Runner"); !strings.Contains(r, "` opensandbox ` | ` gateway ` | ` command ` |") || !strings.Contains(r, "` docker ` | ` docker `") {
		t.Errorf("runner row %q", r)
	}
	if r := row("Reached through"); !strings.Contains(r, "OpenSandbox lifecycle API and execd") || !strings.Contains(r, "the platform's CLI") {
		t.Errorf("reached-through row %q", r)
	}
	if r := row("Mean sandbox start"); !strings.HasSuffix(r, "| 3.10 s | 2.20 s | 0.70 s |") {
		t.Errorf("start row %q", r)
	}
	if r := row("Host kernel surface"); strings.Count(r, "not traced (remote platform)") != 3 || strings.Count(r, "2 syscalls") != 4 {
		t.Errorf("surface row %q", r)
	}
	if r := row("Host kernel"); strings.Count(r, "harness's:") != 3 {
		t.Errorf("kernel row %q", r)
	}
	if r := row("Escaped"); strings.Count(r, "2 of 5") != 7 {
		t.Errorf("escaped row %q", r)
	}
	html := page.String()
	for _, s := range []string{"<th>opensandbox</th><th>gateway</th><th>command</th>", "<td>the gateway&#39;s API</td>",
		"not traced (remote platform)", "harness&#39;s: "} {
		if !strings.Contains(html, s) {
			t.Errorf("compare.html lacks %q", s)
		}
	}
}

// A matrix publishes an inconclusive cell only where its column's
// reference says why: without a reference, or with one that does not
// explain the cell, ExplainInconclusive names the column, its target and
// the probe; with the reason, the cell stands and both pages show it.
// Cells the host confirmed are marked, and each cell of compare.html links
// to its run's report.
func TestCompareExplainsInconclusiveCells(t *testing.T) {
	dir := storeRuns(t, weakRecord())
	runs, err := LoadRecords([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	refs := t.TempDir()
	c := Compare(runs)
	err = c.ExplainInconclusive(refs)
	if err == nil || !strings.Contains(err.Error(), "column docker/runc (target weak)") || !strings.Contains(err.Error(), "syscalls.bpf") {
		t.Fatalf("no reference: %v, want an error naming the column, its target and the probe", err)
	}
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(refs, "weak.yaml"), []byte("schema: sandcheck.dev/reference/v1\ntarget: weak\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("outcomes: {privilege.root-uid: escaped}\n")
	if err := c.ExplainInconclusive(refs); err == nil || !strings.Contains(err.Error(), "should have measured") || !strings.Contains(err.Error(), "syscalls.bpf") {
		t.Fatalf("reference without the reason: %v, want the probe refused", err)
	}
	write("outcomes: {syscalls.bpf: inconclusive}\n")
	if err := c.ExplainInconclusive(refs); err == nil || !strings.Contains(err.Error(), "no reason") {
		t.Fatalf("an inconclusive outcome without a reason: %v, want the reference refused", err)
	}
	write("inconclusive: {syscalls.bpf: \"the errno <b>14</b> is not one the probe knows\"}\n")
	c = Compare(runs)
	if err := c.ExplainInconclusive(refs); err != nil {
		t.Fatalf("explained: %v", err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "runs", "a", "report.html"), []byte("<html></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.LinkReports(out); err != nil {
		t.Fatal(err)
	}
	var md, page bytes.Buffer
	if err := WriteCompareMarkdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| ` metadata.aws-imdsv1 ` | escaped ✓ |", "| ` privilege.root-uid ` | escaped |",
		"| Inconclusive (explained) | 1 (1) |", "| Host-confirmed | 1 of 5 |", "## Explained inconclusive cells",
		"| ` docker/runc ` | ` weak ` | ` syscalls.bpf ` | ` the errno <b>14</b> is not one the probe knows ` |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("compare.md lacks %q:\n%s", s, md.String())
		}
	}
	rel, _ := filepath.Rel(out, filepath.Join(dir, "runs", "a", "report.html"))
	for _, s := range []string{`<a href="` + rel + `#result-metadata.aws-imdsv1">escaped ✓</a>`,
		`title="the errno &lt;b&gt;14&lt;/b&gt; is not one the probe knows"`, "<h2>Explained inconclusive cells</h2>"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("compare.html lacks %q", s)
		}
	}
	if strings.Contains(page.String(), "<b>14") {
		t.Error("compare.html carries the reason unescaped")
	}
}
