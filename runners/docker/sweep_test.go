package docker

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestOwnerAlive(t *testing.T) {
	if alive, known := ownerAlive(selfOwner()); !alive || !known {
		t.Errorf("this process: alive %v known %v", alive, known)
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := bootID() + "/" + itoa(cmd.Process.Pid) + "/1"
	if alive, known := ownerAlive(dead); alive || !known {
		t.Errorf("an exited process: alive %v known %v", alive, known)
	}
	// A pid reused by another process: same pid, other start time.
	reused := bootID() + "/" + itoa(os.Getpid()) + "/1"
	if alive, _ := ownerAlive(reused); alive {
		t.Error("a reused pid counts as the owner")
	}
	if alive, known := ownerAlive("other-boot/1/1"); alive || !known {
		t.Errorf("another boot: alive %v known %v", alive, known)
	}
	if _, known := ownerAlive("junk"); known {
		t.Error("junk owner is known")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDeadReason(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Minute).UTC().Format(time.RFC3339)
	future := now.Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		labels  map[string]string
		created time.Time
		dead    bool
	}{
		{map[string]string{LabelOwner: selfOwner(), LabelDeadline: future}, now, false},
		{map[string]string{LabelOwner: selfOwner(), LabelDeadline: past}, now, true},
		{map[string]string{LabelOwner: bootID() + "/999999999/1", LabelDeadline: future}, now, true},
		{map[string]string{}, now, false},
		{map[string]string{}, now.Add(-3 * time.Hour), true},
	} {
		if got := deadReason(c.labels, c.created, unownedAge); (got != "") != c.dead {
			t.Errorf("%v created %s: %q", c.labels, c.created, got)
		}
	}
}

// TestSweepRunDirs: a folder whose owner is gone, or that no process holds,
// goes (with its honey credentials); a live owner's, one whose agent socket is
// bound, or one changed in the last seconds (a run starting), stays.
func TestSweepRunDirs(t *testing.T) {
	base := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(base, "sandcheck-run-"+name)
		if err := os.MkdirAll(filepath.Join(d, "home"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "home", "credentials"), []byte("honey"), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	live, dead, held, loose := mk("live"), mk("dead"), mk("held"), mk("loose")
	if err := MarkRunDir(live); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ownerFile), []byte(bootID()+"/999999999/1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	for _, d := range []string{live, dead, held, loose} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	young := mk("young")
	ln, err := net.Listen("unix", filepath.Join(held, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	removed, kept, err := sweepRunDirs(filepath.Join(base, RunDirPattern), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{live, held, young} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("live folder %s removed: %v (kept %q)", d, err, kept)
		}
	}
	for _, d := range []string{dead, loose} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("dead folder %s kept (removed %q)", d, removed)
		}
	}
	if len(removed) != 2 || len(kept) != 3 {
		t.Errorf("removed %q kept %q", removed, kept)
	}
}

// TestSweepRunDirsOfOneOwner: a sweep confined to one owner (a reaper's)
// removes that dead owner's folder and looks at nothing else: not another
// dead owner's, not one without an owner file that no process holds.
func TestSweepRunDirsOfOneOwner(t *testing.T) {
	base := t.TempDir()
	old := time.Now().Add(-time.Minute)
	mk := func(name, owner string) string {
		d := filepath.Join(base, "sandcheck-run-"+name)
		if err := os.MkdirAll(filepath.Join(d, "home"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	mine, theirs := bootID()+"/999999999/1", bootID()+"/999999998/1"
	ours, other, loose := mk("ours", mine), mk("other", theirs), mk("loose", "")
	removed, kept, err := sweepRunDirs(filepath.Join(base, RunDirPattern), mine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ours); err == nil {
		t.Errorf("the owner's dead folder %s kept (removed %q, kept %q)", ours, removed, kept)
	}
	for _, d := range []string{other, loose} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("folder %s, not the owner's, removed: %v", d, err)
		}
	}
	if len(removed) != 1 || len(kept) != 0 {
		t.Errorf("removed %q kept %q, want one removed and the others not looked at", removed, kept)
	}
}
