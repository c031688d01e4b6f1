package wrapper

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/internal/owner"
	"github.com/sandcheck/sandcheck/runners/process"
	"github.com/sandcheck/sandcheck/targets"
)

// TestSweep: a sandbox folder whose owner is gone goes, with its cgroup; one
// whose owner lives stays, and so does one made a moment ago without an
// owner file yet; with an owner given only that owner's are looked at; a
// folder not named like the runner's sandboxes is never touched.
func TestSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the wrapper's state folder and cgroups need root")
	}
	dead := owner.BootID() + "/999999999/1"
	mk := func(id, who string) string {
		t.Helper()
		dir := filepath.Join(StateRoot, id)
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if who != "" {
			if err := os.WriteFile(filepath.Join(dir, process.OwnerFile), []byte(who+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// What the box left: a link to a host file, which must survive.
		if err := os.Symlink("/etc/hostname", filepath.Join(dir, "work", "link")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := mk("scwr-00000000dead", dead)
	cg, err := process.NewCgroup("scwr-00000000dead", targets.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Remove() })
	live := mk("scwr-00000000a11e", owner.Self())
	fresh := mk("scwr-00000000f2e5", "")
	other := mk("scwr-not-ours", dead)

	removed, kept, err := Sweep(t.Context(), "someone-else/1/1")
	if err != nil || len(removed) != 0 {
		t.Errorf("sweep of another owner's sandboxes: removed %v, err %v; want nothing", removed, err)
	}
	removed, kept, err = Sweep(t.Context(), "")
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := os.Lstat(gone); err == nil {
		t.Errorf("the dead run's sandbox %s is still there (removed %v)", gone, removed)
	}
	if left := cg.Leftovers(); len(left) > 0 {
		t.Errorf("the dead run's cgroup is still there: %v", left)
	}
	if !slices.ContainsFunc(removed, func(s string) bool { return strings.HasPrefix(s, "cgroup scwr-00000000dead") }) {
		t.Errorf("removed %v: want the cgroup named", removed)
	}
	for _, d := range []string{live, fresh, other} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if len(kept) != 2 {
		t.Errorf("kept %v: want the live run's and the fresh unowned sandbox", kept)
	}
	if _, err := os.Stat("/etc/hostname"); err != nil {
		t.Errorf("the sweep followed the box's link: %v", err)
	}
}
