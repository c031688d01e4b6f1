package wrapper

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// What outlived the wrapper with the probe's token is found after Close
// (a host process that escaped its cgroup, a marker in the host's /tmp, a
// network and a container made through the host's engine, as a box that
// reaches its socket makes them) and removed; before Close the search is
// refused.
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
	// An internal network (no traffic, nothing routed) and a container
	// that is created, never started, labelled as the teardown probes
	// label theirs.
	label := probes.LabelTeardownToken + "=" + token
	if out, err := exec.Command("docker", "network", "create", "--internal", "--label", label, "sandcheck-td-"+token).CombinedOutput(); err != nil {
		t.Fatalf("making the engine network: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", "sandcheck-td-"+token).Run() })
	if out, err := exec.Command("docker", "create", "--network", "none", "--label", label, "--name", "sandcheck-td-"+token, "sandcheck/runner:dev", "true").CombinedOutput(); err != nil {
		t.Fatalf("making the engine container: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", "sandcheck-td-"+token).Run() })
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
	for _, k := range []string{"cgroups", "mounts"} {
		if r := byKind[k]; len(r.Found) > 0 || r.Failed != "" {
			t.Errorf("%s: %+v, want nothing found", k, r)
		}
	}
	if f := byKind["network"].Found; len(f) != 1 || !strings.Contains(f[0], "sandcheck-td-"+token) {
		t.Errorf("network found %v, want the engine network", f)
	}
	if r := byKind["container"]; len(r.Found) != 1 || r.Failed != "" {
		t.Errorf("container: %+v, want the engine container", r)
	}
	for _, q := range [][]string{{"ps", "-aq", "--filter", "label=" + label}, {"network", "ls", "-q", "--filter", "label=" + label}} {
		if out, err := exec.Command("docker", q...).Output(); err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("docker %v after FindResidue: %q %v, want nothing left", q, out, err)
		}
	}
	// With nothing of the token's in the engine, the container kind says
	// the runner could not tell (absence settles nothing).
	if again, err := sb.FindResidue(t.Context(), token, []string{"container"}); err != nil || len(again) != 1 || again[0].Failed == "" || len(again[0].Found) > 0 {
		t.Errorf("container with nothing left: %+v %v, want it unchecked", again, err)
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

// TestScratchDirsFollowTheHostsMounts: the folders a token file is looked
// for in hold the host's root and every writable disk or tmpfs mount of
// the host (firejail as root showed the box the host's root writable, and
// the probe's file there stayed unseen), not a read-only one nor the
// kernel's trees.
func TestScratchDirsFollowTheHostsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	rw, ro := filepath.Join(t.TempDir(), "rw"), filepath.Join(t.TempDir(), "ro")
	for _, d := range []string{rw, ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
	}
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	sb := &Sandbox{r: &Runner{}}
	dirs := sb.scratchDirs()
	for _, want := range []string{"/", "/tmp", rw} {
		if !slices.Contains(dirs, want) {
			t.Errorf("scratch folders %v lack %s", dirs, want)
		}
	}
	for _, not := range []string{ro, "/proc", "/sys"} {
		if slices.Contains(dirs, not) {
			t.Errorf("scratch folders %v hold %s", dirs, not)
		}
	}
}
