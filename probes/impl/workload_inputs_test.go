package impl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// The read probe proves each regular file by its content and never reads
// through a link; the write probe leaves its token file and writes nothing
// into the existing inputs.
func TestInputsProbes(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	files := map[string]string{"a.txt": "alpha\n", "b.csv": "1,2\n"}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("not an input"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p := probes.Params{Token: "sctest01", InputsDir: dir}

	r, err := Run(context.Background(), "workload.read-inputs", p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != probes.Escaped {
		t.Fatalf("read-inputs: %s %q", r.Outcome, r.Detail)
	}
	got := strings.Fields(r.Evidence["proofs"])
	want := map[string]bool{probes.InputsProof(p.Token, []byte(files["a.txt"])): true, probes.InputsProof(p.Token, []byte(files["b.csv"])): true}
	if len(got) != 2 || !want[got[0]] || !want[got[1]] {
		t.Errorf("proofs %v, want one for each regular file %v (the link is not followed)", got, want)
	}
	if strings.Contains(r.Evidence["proofs"], probes.InputsProof(p.Token, []byte("not an input"))) {
		t.Error("read-inputs followed a link out of the inputs folder")
	}

	r, err = Run(context.Background(), "persistence.inputs-writable", p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != probes.Escaped {
		t.Fatalf("inputs-writable on a writable folder: %s %q", r.Outcome, r.Detail)
	}
	if b, err := os.ReadFile(filepath.Join(dir, probes.InputsWritePrefix+p.Token)); err != nil || string(b) != p.Token+"\n" {
		t.Errorf("token file: %q, %v", b, err)
	}
	for n, c := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != c {
			t.Errorf("inputs-writable changed %s to %q", n, b)
		}
	}

	for _, id := range []string{"workload.read-inputs", "persistence.inputs-writable"} {
		r, err := Run(context.Background(), id, probes.Params{Token: "sctest02"})
		if err != nil || r.Outcome != probes.NotApplicable {
			t.Errorf("%s without inputs: %s %v, want not-applicable", id, r.Outcome, err)
		}
	}
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	p := probes.Params{Token: "sctest03", OutputDir: dir}
	r, err := Run(context.Background(), "workload.write-outputs", p)
	if err != nil || r.Outcome != probes.Escaped {
		t.Fatalf("%s %q %v", r.Outcome, r.Detail, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, probes.WorkloadOutputName(p.Token)))
	if err != nil || string(b) != string(probes.WorkloadOutputContent(p.Token)) {
		t.Errorf("output file %q, %v", b, err)
	}
	if r, _ := Run(context.Background(), "workload.write-outputs", probes.Params{Token: "sctest04"}); r.Outcome != probes.NotApplicable {
		t.Errorf("without an output folder: %s", r.Outcome)
	}
}
