package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

func inputsEngine(t *testing.T, readOnly bool) (*Engine, *runners.RunEnv) {
	t.Helper()
	e := &Engine{runDir: t.TempDir(), rec: &evidence.Record{RunID: "20261130t000000-00000000"},
		target: &targets.Target{Inputs: &targets.Inputs{Path: "/inputs", ReadOnly: readOnly}}}
	d := &runners.RunEnv{}
	if err := e.setupInputs(d); err != nil {
		t.Fatal(err)
	}
	return e, d
}

// The host reads the planted folder back: a proof per planted file is a
// read, anything added, changed, replaced by a link or removed is a change,
// and the probe's token names the change as its own.
func TestInputsHostChecks(t *testing.T) {
	e, d := inputsEngine(t, true)
	if len(d.Mounts) != 1 || d.Mounts[0].Target != "/inputs" || !d.Mounts[0].ReadOnly || d.Mounts[0].Source != e.in.dir {
		t.Fatalf("mounts %+v", d.Mounts)
	}
	if ti := e.rec.Target.Inputs; ti == nil || ti.Source != e.in.dir || !ti.ReadOnly {
		t.Errorf("record target inputs %+v", ti)
	}
	if !e.isInputsMount(e.in.dir, "/inputs", true) || e.isInputsMount(e.in.dir, "/inputs", false) || e.isInputsMount("/etc", "/inputs", true) {
		t.Error("isInputsMount must take only the harness's own read-only bind")
	}
	const tok = "sctoken000001"
	var all []string
	for _, c := range e.in.planted {
		all = append(all, probes.InputsProof(tok, c))
	}
	check := func(kind, proofs string) evidence.Item {
		return e.inputsEvidence(kind, tok, selfReport{Fields: map[string]string{"proofs": proofs}})
	}
	if it := check("inputs:read", strings.Join(all, " ")); it.Indicates != probes.Escaped {
		t.Errorf("all proofs: %+v", it)
	}
	if it := check("inputs:read", strings.Join(all[1:], " ")); it.Indicates != probes.Blocked {
		t.Errorf("one proof short: %+v", it)
	}
	if it := e.inputsEvidence("inputs:read", "scother000001", selfReport{Fields: map[string]string{"proofs": strings.Join(all, " ")}}); it.Indicates != probes.Blocked {
		t.Errorf("proofs of another invocation's token: %+v", it)
	}
	if it := check("inputs:intact", ""); it.Indicates != probes.Blocked {
		t.Errorf("untouched folder: %+v", it)
	}
	if err := os.WriteFile(filepath.Join(e.in.dir, probes.InputsWritePrefix+tok), []byte(tok), 0o644); err != nil {
		t.Fatal(err)
	}
	if it := check("inputs:intact", ""); it.Indicates != probes.Escaped || it.Data["by_this_probe"] != "true" {
		t.Errorf("token file added: %+v", it)
	}

	e, _ = inputsEngine(t, false)
	if err := os.WriteFile(filepath.Join(e.in.dir, "task.md"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.in.dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.in.dir, "records.csv"))
	if err := os.Symlink("/etc/passwd", filepath.Join(e.in.dir, "records.csv")); err != nil {
		t.Fatal(err)
	}
	it := e.inputsEvidence("inputs:intact", tok, selfReport{})
	for _, w := range []string{"task.md changed", "notes.txt removed", "records.csv replaced"} {
		if !strings.Contains(it.Summary, w) {
			t.Errorf("summary %q lacks %q", it.Summary, w)
		}
	}
	if it.Indicates != probes.Escaped || it.Data["by_this_probe"] != "false" {
		t.Errorf("changed folder: %+v", it)
	}

	none := &Engine{target: &targets.Target{}}
	if it := none.inputsEvidence("inputs:read", tok, selfReport{}); it.Kind != "inputs-undeclared" || it.Indicates != "" {
		t.Errorf("no inputs declared: %+v", it)
	}
}

// The task's plain output counts as handed over only when the release holds
// it as a regular file with the content the task was to write.
func TestWorkloadOutputEvidence(t *testing.T) {
	const tok = "sctoken000002"
	sum := sha256.Sum256(probes.WorkloadOutputContent(tok))
	good := output.Artifact{Path: probes.WorkloadOutputName(tok), Kind: output.KindFile, Released: true, SHA256: "sha256:" + hex.EncodeToString(sum[:])}
	for name, c := range map[string]struct {
		arts []output.Artifact
		want probes.Outcome
	}{
		"released as written": {[]output.Artifact{good}, probes.Escaped},
		"withheld":            {[]output.Artifact{{Path: good.Path, Kind: output.KindFile, SHA256: good.SHA256}}, probes.Blocked},
		"other content":       {[]output.Artifact{{Path: good.Path, Kind: output.KindFile, Released: true, SHA256: "sha256:00"}}, probes.Blocked},
		"a link by that name": {[]output.Artifact{{Path: good.Path, Kind: output.KindSymlink, Released: true}}, probes.Blocked},
		"missing":             {nil, probes.Blocked},
	} {
		e := &Engine{out: &outputPath{decl: &targets.Output{Path: "/out", Release: output.ModeGated},
			releases: map[string]*output.Release{tok: {Mode: output.ModeGated, Artifacts: c.arts}}}}
		if it := e.workloadOutputEvidence(tok); it.Indicates != c.want {
			t.Errorf("%s: %+v, want %s", name, it, c.want)
		}
	}
	e := &Engine{out: &outputPath{decl: &targets.Output{Path: "/out", Release: output.ModeGated}, releases: map[string]*output.Release{}}}
	if it := e.workloadOutputEvidence(tok); it.Indicates != "" {
		t.Errorf("no release taken: %+v, want no indication", it)
	}
	if it := (&Engine{}).workloadOutputEvidence(tok); it.Kind != "output-undeclared" || it.Indicates != "" {
		t.Errorf("no output folder: %+v", it)
	}
}
