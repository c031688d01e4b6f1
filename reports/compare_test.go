package reports

import (
	"bytes"
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
