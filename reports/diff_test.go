package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// checkGolden compares got with testdata/name; -update rewrites it.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update if the change is intended):\n%s", path, got)
	}
}

func probeIDs(rs []ResultChange) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Probe)
	}
	slices.Sort(out)
	return out
}

// From the hardened run to the weak one: the runtime changed, and the
// escapes and the inconclusive result are new failures; back again they
// are fixes and no regression.
func TestDiffNamesMaterialChangesAndRegressions(t *testing.T) {
	old, cur := hardenedRecord(), weakRecord()
	d := Diff(old, cur)
	if !d.Regressed() {
		t.Error("hardened → weak is no regression")
	}
	if got, want := probeIDs(d.NewFailures), []string{"metadata.aws-imdsv1", "privilege.root-uid", "syscalls.bpf"}; !slices.Equal(got, want) {
		t.Errorf("new failures %v, want %v", got, want)
	}
	var what []string
	for _, c := range d.Material {
		what = append(what, c.What)
	}
	for _, w := range []string{"runtime", "target file"} {
		if !slices.Contains(what, w) {
			t.Errorf("material changes %v lack %s", what, w)
		}
	}
	var b bytes.Buffer
	if err := WriteDiffMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "diff-hardened-weak.md", b.Bytes())

	back := Diff(cur, old)
	if back.Regressed() || len(back.Fixed) != 2 || len(back.NewFailures) != 0 || len(back.Removed) != 3 {
		t.Errorf("weak → hardened: regressed %v, fixed %v, new %v", back.Regressed(), probeIDs(back.Fixed), probeIDs(back.NewFailures))
	}
	same := Diff(cur, cur)
	if same.Regressed() || len(same.Material)+len(same.NewFailures)+len(same.Fixed)+len(same.ChangedEvidence)+len(same.Criteria) != 0 {
		t.Errorf("a run differs from itself: %+v", same)
	}
}

// A kernel and image change with the same outcomes is still named, and
// host evidence that changed under an unchanged outcome is reported.
func TestDiffChangedEvidence(t *testing.T) {
	old := hardenedRecord()
	cur := hardenedRecord()
	cur.Host.Kernel = "6.12.0-1-amd64"
	old.Sandboxes = []evidence.Sandbox{{ID: "s", View: &runners.RuntimeView{NetworkMode: "none"}}}
	cur.Sandboxes = []evidence.Sandbox{{ID: "s", View: &runners.RuntimeView{NetworkMode: "none", Labels: map[string]string{RuntimeVersionLabel: "1.1.12"}}}}
	cur.Image.Digest = "sha256:cafe"
	cur.Results[2].Evidence = append(cur.Results[2].Evidence, host(evidence.SourceTracer, "syscall", probes.Blocked, "bpf EPERM"))
	d := Diff(old, cur)
	if d.Regressed() {
		t.Error("an evidence change is a regression")
	}
	if len(d.ChangedEvidence) != 1 || d.ChangedEvidence[0].Probe != "syscalls.bpf" || d.ChangedEvidence[0].Message != "now tracer/syscall (blocked)" {
		t.Errorf("changed evidence %+v", d.ChangedEvidence)
	}
	if len(d.Material) != 3 || d.Material[0].What != "runtime version" || d.Material[0].New != "1.1.12" ||
		d.Material[1].What != "host kernel" || d.Material[2].What != "image digest" {
		t.Errorf("material %+v", d.Material)
	}
}

// storeRuns writes records as run.json files in folders of dir.
func storeRuns(t *testing.T, recs ...*evidence.Record) string {
	t.Helper()
	dir := t.TempDir()
	for i, rec := range recs {
		sub := filepath.Join(dir, "runs", string(rune('a'+i)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(filepath.Join(sub, "run.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The history of three nightly runs of one target marks the night the
// runtime changed and failures appeared.
func TestHistory(t *testing.T) {
	night := func(rec *evidence.Record, day int) *evidence.Record {
		rec.Target.Name, rec.Target.Path, rec.Target.Digest = "nightly", "targets/nightly.yaml", "sha256:feed"
		rec.RunID = rec.RunID + "-" + string(rune('0'+day))
		rec.StartedAt = start.Add(time.Duration(day) * 24 * time.Hour)
		return rec
	}
	dir := storeRuns(t, night(weakRecord(), 3), night(hardenedRecord(), 1), night(hardenedRecord(), 2))
	runs, err := LoadRecords([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	rows := History(runs)
	if len(rows) != 3 || rows[0].Regressed || rows[1].Regressed || !rows[2].Regressed || rows[2].NewFailures != 3 ||
		!slices.Contains(rows[2].Material, "runtime") {
		t.Fatalf("history rows %+v", rows)
	}
	for i := range rows {
		rows[i].Path = filepath.Base(filepath.Dir(rows[i].Path))
	}
	var md, page bytes.Buffer
	if err := WriteHistoryMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteHistoryHTML(&page, rows); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "history.md", md.Bytes())
	checkGolden(t, "history.html", page.Bytes())

	if _, err := LoadRecords([]string{t.TempDir()}); err == nil {
		t.Error("a folder without run.json is no error")
	}
	bad := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(bad, []byte(`{"schema":"other"}`), 0o644)
	if _, err := LoadRecords([]string{bad}); err == nil {
		t.Error("a record of another schema is accepted")
	}
}

// The comparison puts the process control first and shows each kind's
// start time and host kernel surface beside each probe's outcome.
func TestCompare(t *testing.T) {
	proc := weakRecord()
	proc.Runner, proc.Runtime, proc.RunID = "process", "", "run-process"
	proc.Sandboxes = []evidence.Sandbox{{ID: "p1", StartSeconds: 0.01}}
	proc.Tracer = &evidence.Tracer{Status: "on", HostSyscalls: []string{"read", "write", "bpf", "mount"}, Sandboxes: []evidence.TracedSandbox{{ID: "p1"}}}
	gv := hardenedRecord()
	gv.Sandboxes = []evidence.Sandbox{{ID: "g1", StartSeconds: 0.9}, {ID: "g2", StartSeconds: 1.1}}
	gv.Tracer = &evidence.Tracer{Status: "on", HostSyscalls: []string{"read", "write"}, Sandboxes: []evidence.TracedSandbox{{ID: "g1"}, {ID: "g2"}}}
	runc := weakRecord()
	runc.Tracer = &evidence.Tracer{Status: "unavailable"}
	dir := storeRuns(t, gv, runc, proc)
	runs, err := LoadRecords([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(runs)
	var kinds []string
	for _, col := range c.Columns {
		kinds = append(kinds, col.Kind)
	}
	if !slices.Equal(kinds, []string{"process", "docker/runc", "docker/runsc"}) {
		t.Errorf("columns %v", kinds)
	}
	if c.Columns[0].Surface != 4 || c.Columns[1].Surface != -1 || c.Columns[2].StartSeconds != 1.0 {
		t.Errorf("columns %+v", c.Columns)
	}
	var md, page bytes.Buffer
	if err := WriteCompareMarkdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "compare.md", md.Bytes())
	checkGolden(t, "compare.html", page.Bytes())
}
