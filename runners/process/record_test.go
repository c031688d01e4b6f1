package process

import (
	"os"
	"path/filepath"
	"testing"
)

// A sweep takes a dead sandbox's cgroup folders from its state folder's
// record, wherever the run's cgroup was, and only folders of cgroups of
// the sandbox's name under the cgroup mounts: a record pointing anywhere
// else is refused, not killed and removed.
func TestOpenRecordedCgroup(t *testing.T) {
	const id = "scproc-0123456789ab"
	state := t.TempDir()
	// No record: the folders beside this process's cgroups, if any.
	if _, err := OpenRecordedCgroup(id, state); err != nil {
		t.Errorf("without a record: %v", err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(state, cgroupFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{
		"pids\t/sys/fs/cgroup/pids/system.slice\n",
		"pids\t/sys/fs/cgroup/pids/a/../" + id + "\n",
		"pids\t/tmp/" + id + "\n",
		"pids\t/sys/fs/cgroup/memory/" + id + "\n",
		"garbage\n",
	} {
		write(bad)
		if _, err := OpenRecordedCgroup(id, state); err == nil {
			t.Errorf("record %q was taken", bad)
		}
	}
	// A good record of folders that are gone: nothing to remove.
	write("pids\t/sys/fs/cgroup/pids/e2e-run/" + id + "\nfreezer\t/sys/fs/cgroup/freezer/e2e-run/" + id + "\n")
	cg, err := OpenRecordedCgroup(id, state)
	if err != nil || len(cg.dirs) != 0 || len(cg.Leftovers()) != 0 {
		t.Errorf("a record of folders that are gone: %v, %v", cg, err)
	}
	// Record writes what OpenRecordedCgroup reads.
	rec := &Cgroup{dirs: map[string]string{"pids": "/sys/fs/cgroup/pids/x/" + id}}
	if err := rec.Record(state); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, cgroupFile)); string(b) != "pids\t/sys/fs/cgroup/pids/x/"+id+"\n" {
		t.Errorf("record: %q", b)
	}
}
