package impl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
)

// Every output probe plants its artifacts under its prefix, reports
// inconclusive (the host decides), and what the packer streams out of the
// folder is flagged by the gate with the flag the probe aims at.
func TestOutputProbesPlantPackAndGetFlagged(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{
		"output.symlink-out": output.FlagSymlinkOutside, "output.traversal-name": output.FlagTraversalName,
		"output.special-files": output.FlagSpecial, "output.oversize": output.FlagOversize,
		"output.archive-bomb": output.FlagArchiveBomb, "output.secret-content": output.FlagSecret,
		"output.eicar": output.FlagEICAR, "output.active-content": output.FlagActiveContent,
	}
	p := probes.Params{Token: "sctest01", OutputDir: dir}
	for id := range want {
		r, err := Run(context.Background(), id, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != probes.Inconclusive || r.Evidence["planted"] == "" {
			t.Errorf("%s: %s %q %v, want inconclusive with what it planted", id, r.Outcome, r.Detail, r.Evidence)
		}
	}
	var tarBuf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Pack(&tarBuf, dir, PackLimits{MaxFiles: 64, MaxFileBytes: 64 << 10, MaxTotalBytes: 128 << 10})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Pack hung (opened the fifo?)")
	}
	if tarBuf.Len() > output.MaxPackBytes+4096 {
		t.Errorf("packed %d bytes, bound %d", tarBuf.Len(), output.MaxPackBytes)
	}
	rel := output.ReadTar(&tarBuf, t.TempDir(), output.Limits{MaxFiles: 32, MaxFileBytes: 64 << 10, MaxTotalBytes: 128 << 10})
	if rel.Error != "" {
		t.Fatalf("release: %s", rel.Error)
	}
	for id, flag := range want {
		prefix := probes.OutputArtifactPrefix(p.Token, id)
		found := false
		for _, a := range rel.Artifacts {
			if strings.Contains(a.Path, prefix) && a.Flagged(flag) {
				found = true
				if a.Released {
					t.Errorf("%s: %s released", id, a.Path)
				}
			}
		}
		if !found {
			t.Errorf("%s: no artifact flagged %s in %+v", id, flag, rel.Artifacts)
		}
	}
	// The symlink probe's absolute target was never created by packing.
	if _, err := os.Lstat(filepath.Join("/tmp", "sandcheck-output-escape-"+probes.OutputArtifactPrefix(p.Token, "output.symlink-out"))); err == nil {
		t.Error("the link's target exists: something followed the link")
	}
}

func TestOutputProbesWithoutFolderAreNotApplicable(t *testing.T) {
	r, err := Run(context.Background(), "output.eicar", probes.Params{Token: "x"})
	if err != nil || r.Outcome != probes.NotApplicable {
		t.Errorf("%v %+v, want not-applicable", err, r)
	}
}
