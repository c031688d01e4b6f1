package impl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

func TestScratchNotEmptyNeedsAMarkerAndAPhase(t *testing.T) {
	if r := scratchNotEmpty(context.Background(), probes.Params{Phase: "check"}); r.Outcome != probes.Inconclusive {
		t.Errorf("no marker: %s", r.Outcome)
	}
	if r := crontabProbe(context.Background(), probes.Params{Marker: "m", Phase: "later"}); r.Outcome != probes.Inconclusive {
		t.Errorf("bad phase: %s", r.Outcome)
	}
}

func TestPlantCrontabNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cron.d", "entry")
	if got := plantCrontab(path, "# x\n"); got != "written" {
		t.Fatalf("first plant: %s", got)
	}
	if got := plantCrontab(path, "# y\n"); !strings.Contains(got, "EEXIST") {
		t.Errorf("second plant: %s, want EEXIST", got)
	}
	if b, err := readBounded(path, 64); err != nil || string(b) != "# x\n" {
		t.Errorf("entry now %q (%v)", b, err)
	}
	link := filepath.Join(filepath.Dir(path), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readBounded(link, 64); err == nil {
		t.Error("readBounded followed a symlink")
	}
}
