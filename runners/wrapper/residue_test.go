package wrapper

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// What outlived the wrapper with the probe's token is found after Close
// (a host process that escaped its cgroup, a marker in the host's /tmp)
// and removed; before Close the search is refused.
func TestFindResidue(t *testing.T) {
	sb := startEnv(t, Config{User: "nobody"})
	const token = "sctesttoken0residue"
	if _, err := sb.FindResidue(t.Context(), token, []string{"processes"}); err == nil {
		t.Fatal("FindResidue before Close succeeded")
	}
	marker := filepath.Join("/tmp", probes.TeardownPrefix+token)
	if err := os.WriteFile(marker, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker) })
	// Started by the test, not through the sandbox: it stands for a
	// daemon that left the sandbox's cgroup, which Close does not end.
	daemon := exec.Command("/bin/sleep", "60")
	daemon.Env = []string{"SANDCHECK_T=" + token}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	t.Cleanup(func() { daemon.Process.Kill() })
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := sb.FindResidue(t.Context(), token, runners.ResidueKinds)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]runners.Residue{}
	for _, r := range got {
		byKind[r.Kind] = r
	}
	if f := byKind["processes"].Found; len(f) != 1 || !strings.Contains(f[0], "sleep 60") {
		t.Errorf("processes found %v, want the escaped sleep", f)
	}
	if f := byKind["scratch"].Found; len(f) != 1 || !strings.Contains(f[0], marker) {
		t.Errorf("scratch found %v, want %s", f, marker)
	}
	for _, k := range []string{"cgroups", "mounts", "network"} {
		if r := byKind[k]; len(r.Found) > 0 || r.Failed != "" {
			t.Errorf("%s: %+v, want nothing found", k, r)
		}
	}
	if byKind["container"].Failed == "" {
		t.Error("container: the runner does not look, and must say so")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the escaped process was not killed")
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Error("the marker was not removed")
	}
	if _, err := sb.FindResidue(t.Context(), "Bad token!", []string{"processes"}); err == nil {
		t.Error("a loose token was accepted")
	}
}
