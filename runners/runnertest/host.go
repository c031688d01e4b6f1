package runnertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/runners"
)

// probeDir returns a folder holding the stand-in probe (./fakeprobe), built
// statically (the Go build cache makes later builds quick) and removed when
// the test ends.
func probeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandcheck-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Bound into sandboxes whose user may be nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, runners.ProbeBinary),
		"github.com/sandcheck/sandcheck/runners/runnertest/fakeprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in probe: %v\n%s", err, out)
	}
	return dir
}

// checkGone fails the test for anything of the sandbox left on the host
// after Close: host processes carrying its marker, mounts naming its probe
// folder, and whatever its TeardownVerifier finds. Processes may take a
// moment to go, so it looks again for up to goneGrace.
func checkGone(t *testing.T, sb runners.Sandbox, mark, probeDir string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(goneGrace); ; time.Sleep(200 * time.Millisecond) {
		left = markedProcesses(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	left = append(left, mountsNaming(probeDir)...)
	if tv, ok := sb.(runners.TeardownVerifier); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*goneGrace)
		defer cancel()
		found, err := tv.VerifyTeardown(ctx)
		if err != nil {
			t.Errorf("VerifyTeardown: %v", err)
		}
		left = append(left, found...)
	}
	if len(left) > 0 {
		t.Errorf("left on the host after Close:\n%s", strings.Join(left, "\n"))
	}
}

// markedProcesses lists host processes whose environment carries
// Marker=mark.
func markedProcesses(mark string) []string {
	want := []byte(Marker + "=" + mark + "\x00")
	names, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, dir := range names {
		if filepath.Base(dir) == self {
			continue
		}
		env := bounded.ReadFile(filepath.Join(dir, "environ"), 1<<20)
		if !bytes.Contains(append(env, 0), want) {
			continue
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(bounded.ReadFile(filepath.Join(dir, "cmdline"), 512)), "\x00"), "\x00", " ")
		out = append(out, fmt.Sprintf("process %s (%s) of the sandbox", filepath.Base(dir), cmd))
	}
	return out
}

// mountsNaming lists mounts of the host's mount namespace that name dir.
func mountsNaming(dir string) []string {
	f, err := os.Open("/proc/1/mountinfo")
	if err != nil {
		return []string{"reading the host's mountinfo: " + err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir) {
			out = append(out, "mount still names "+dir+": "+sc.Text())
		}
	}
	return out
}

// cgroupDirs lists the cgroup folders of the pids and memory hierarchies
// (v1) or of the unified one (v2), a few levels deep, leaving out Docker's
// own (other tests' containers come and go meanwhile).
func cgroupDirs() map[string]bool {
	out := map[string]bool{}
	for _, root := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		for _, pat := range []string{"/*", "/*/*", "/*/*/*"} {
			found, _ := filepath.Glob(root + pat + "/cgroup.procs")
			for _, f := range found {
				d := filepath.Dir(f)
				if strings.Contains(d, "docker") || strings.Contains(d, ".slice") {
					continue
				}
				out[d] = true
			}
		}
	}
	return out
}

// newCgroupDirs lists cgroup folders that exist now but not in before,
// looking again for a moment (a killed process leaves its cgroup late).
func newCgroupDirs(before map[string]bool) []string {
	var out []string
	for deadline := time.Now().Add(goneGrace); ; time.Sleep(200 * time.Millisecond) {
		out = out[:0]
		for d := range cgroupDirs() {
			if !before[d] {
				out = append(out, "cgroup "+d)
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
	}
}
