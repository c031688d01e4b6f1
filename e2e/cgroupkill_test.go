package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cgroupKillHierarchies are the cgroup v1 hierarchies the test's run gets
// a cgroup of its own in: the one systemd kills a unit through
// (name=systemd), and pids and freezer, which container runtimes and CI
// runners use to find every process of a job.
var cgroupKillHierarchies = []string{"systemd", "pids", "freezer"}

// TestCgroupKilledRunLeavesNothing (issue 40 item 5) starts a run in a
// cgroup of its own and, once its sandboxes are up, kills every process of
// that cgroup and of the cgroups below it, as systemd stopping a unit or a
// CI runner cancelling a job does: not one process group, every process,
// whatever its session. Before, the run's reaper was in the run's cgroup
// and died with it, and the run's sandboxes (weak ones running as root with
// the engine socket), harness network, firewall rules and folders stayed
// until the next run or `sandcheck cleanup`. The reaper must be out of the
// run's cgroups before the kill, outlive it, and have removed, within
// reapWithin: every container, network and volume of the run, its bridge
// and firewall rules, its run folder, the host runners' sandbox folders,
// cgroups and mounts, and anything else new under /run or /tmp, mount,
// network namespace, link or container process that a host snapshot
// (hoststate_test.go) finds and that was not there before. It covers the
// docker runner (the weak reference) and the host-process runners whose
// sandboxes are host processes with namespace holders (bwrap, process).
func TestCgroupKilledRunLeavesNothing(t *testing.T) {
	bin := binDir(t)
	for _, h := range cgroupKillHierarchies {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "cgroup.procs")); err != nil {
			t.Skipf("no cgroup v1 %s hierarchy here: %v", h, err)
		}
	}
	for _, tc := range []struct {
		target       string
		root, prefix string // host runners: where their sandboxes' state is
	}{
		{target: "weak.yaml"},
		{target: "bwrap-weak.yaml", root: "/run/sandcheck-bwrap", prefix: "scbw"},
		{target: "process.yaml", root: "/run/sandcheck-process", prefix: "scproc"},
	} {
		t.Run(tc.target, func(t *testing.T) { cgroupKillRun(t, bin, tc.target, tc.root, tc.prefix) })
	}
}

func cgroupKillRun(t *testing.T, bin, target, root, prefix string) {
	waitHarnessLockFree(t)
	out := t.TempDir()
	cgs := newRunCgroup(t)
	before := snapshotHost(t)
	// The shell joins the run's cgroups, then execs the run: the run and
	// all it starts are born in them.
	procs := make([]string, len(cgs))
	for i, d := range cgs {
		procs[i] = filepath.Join(d, "cgroup.procs")
	}
	script := `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 97; shift; n=$((n-1)); done; exec "$@"`
	args := append([]string{"-c", script, "sh", strconv.Itoa(len(procs))}, procs...)
	args = append(args, filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/"+target, "--out-dir", out, "--quiet", "--parallel", "1")
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = ".."
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &se, &se
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { // whatever happens, nothing of this test's run keeps running
		killCgroupTree(cgs)
		<-exited
	}()
	pid := cmd.Process.Pid

	// Up to 90 s for the run's sandboxes (the harness lock, image checks).
	k := killedRun{pid: pid}
	var ids []string
	up := func() bool {
		if root != "" {
			ids = sandboxesOwnedBy(root, prefix, pid)
			return len(ids) > 0
		}
		if k.runID == "" {
			k.runID = runIDOf(out)
		}
		return k.runID != "" && len(dockerLines("ps", "-q", "--filter", "label=sandcheck.run="+k.runID, "--filter", "label=sandcheck.sandbox=1")) > 0
	}
	for deadline := time.Now().Add(90 * time.Second); !up(); time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the run ended before its sandboxes were up: the kill would test nothing\n%s", se.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run had no sandbox up within 90 s: the kill would test nothing\n%s", se.String())
		}
	}
	time.Sleep(time.Second)
	if root != "" {
		ids = sandboxesOwnedBy(root, prefix, pid)
	}
	k.runID = runIDOf(out)
	k.bridge = bridgeOf(k.runID)
	k.dirs = runDirsOf(pid)
	if k.runID != "" {
		k.sandboxes = dockerLines("ps", "-aq", "--filter", "label=sandcheck.run="+k.runID)
	}

	// The reaper runs, and not in the run's cgroups: the kill cannot reach it.
	reaper := reaperOf(pid)
	if reaper == "" {
		t.Fatalf("the run has no reaper running\n%s", se.String())
	}
	rpid, _ := strconv.Atoi(strings.TrimPrefix(reaper, "pid "))
	inRun := inCgroups(rpid, cgs)
	if len(inRun) > 0 {
		t.Errorf("the reaper (%s) is in the run's cgroups %v: a kill of the run's cgroup takes it too", reaper, inRun)
	}

	killed := killCgroupTree(cgs)
	<-exited
	at := time.Now()
	t.Logf("killed every process of the run's cgroups (%d): run %s, bridge %q, %d containers, run folders %q, host sandboxes %v",
		len(killed), k.runID, k.bridge, len(k.sandboxes), k.dirs, ids)
	if !killed[pid] {
		t.Errorf("the kill did not find the run (pid %d) in the run's cgroups: it tested nothing", pid)
	}
	if root == "" && (len(k.sandboxes) == 0 || k.bridge == "" || len(k.dirs) == 0) {
		t.Errorf("the kill met no container, harness bridge or run folder: it tested less than it should\n%s", se.String())
	}
	// Its sweeps take at least 8 s (reapSettle): alive now, or the kill took it.
	if syscall.Kill(rpid, 0) != nil {
		t.Errorf("the reaper (%s) did not survive the kill of the run's cgroup", reaper)
	}

	var left []string
	for {
		left = cgroupKillLeftovers(t, k, root, ids, cgs)
		if len(left) == 0 || time.Since(at) > reapWithin {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(at)
	log := readSmall(filepath.Join(out, "reaper.log"))
	if len(left) > 0 {
		t.Fatalf("%s after the kill of the run's cgroup, the run left:\n  %s\nreaper.log:\n%s", reapWithin, strings.Join(left, "\n  "), log)
	}
	if !bytes.Contains(log, []byte("removed")) {
		t.Errorf("the reaper's log names nothing it removed (so who did?):\n%s", log)
	}
	// And nothing else that a host snapshot sees, still there twice 3 s
	// apart, that was not there before the run.
	after := snapshotHost(t)
	time.Sleep(3 * time.Second)
	later := snapshotHost(t)
	// What belongs to other work on the machine (the Go toolchain's and
	// other tests' /tmp folders: in CI the next package compiles beside
	// this one; another run's things) is ignored as the host-state test
	// ignores it (world.theirs); what names this run never is.
	world := newWorld(ourRun{runID: k.runID, out: out}, before, after, later)
	var extra []string
	for _, key := range after.keys() {
		if before.has(key) || !later.has(key) {
			continue
		}
		if strings.HasPrefix(key, "netns-file ") {
			// An unmounted file libnetwork removes on its next collection
			// (hoststate_test.go): it holds no namespace.
			continue
		}
		if why := world.theirs(after.items[key]); why != "" {
			t.Logf("ignored %s: %s", after.items[key], why)
			continue
		}
		extra = append(extra, after.items[key])
	}
	if len(extra) > 0 {
		t.Errorf("new on the host after the run's things were gone:\n  %s", strings.Join(extra, "\n  "))
	}
	t.Logf("all gone %.1fs after the kill; reaper.log: %d lines; host snapshot: %d items before, %d after, %d new", took.Seconds(), bytes.Count(log, []byte("\n")), len(before.items), len(after.items), len(extra))
}

// cgroupKillLeftovers lists what of the killed run is still on the host:
// killedRun.leftovers (docker objects, bridge, firewall rules, run folders,
// the reaper still running), and for a host runner its sandboxes' folders,
// cgroups (wherever they are: below the run's cgroup, beside it) and mounts.
func cgroupKillLeftovers(t *testing.T, k killedRun, root string, ids []string, cgs []string) []string {
	left := k.leftovers(t)
	if root == "" {
		return left
	}
	mountinfo := readSmall("/proc/self/mountinfo")
	for _, id := range ids {
		dir := filepath.Join(root, id)
		if _, err := os.Lstat(dir); err == nil {
			left = append(left, "folder "+dir)
		}
		if bytes.Contains(mountinfo, []byte(dir)) {
			left = append(left, "a mount under "+dir)
		}
		found, _ := filepath.Glob("/sys/fs/cgroup/*/" + id)
		for _, d := range cgs {
			if _, err := os.Lstat(filepath.Join(d, id)); err == nil {
				found = append(found, filepath.Join(d, id))
			}
		}
		// And beside the run's cgroups in the other hierarchies (memory,
		// cpu, cpuacct): wherever the runner made them.
		own := readSmall("/proc/self/cgroup")
		for _, line := range strings.Split(string(own), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || parts[2] == "/" {
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				p := filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name="), parts[2], id)
				if _, err := os.Lstat(p); err == nil && !slices.Contains(found, p) {
					found = append(found, p)
				}
			}
		}
		for _, f := range found {
			left = append(left, "cgroup "+f)
		}
	}
	return left
}

// newRunCgroup makes a cgroup for one run in each cgroupKillHierarchies, a
// child of this process's own there, and removes it (and any cgroup left
// below it, reported by the test) at the end.
func newRunCgroup(t *testing.T) []string {
	t.Helper()
	own := map[string]string{}
	for _, line := range strings.Split(string(readSmall("/proc/self/cgroup")), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			for _, c := range strings.Split(parts[1], ",") {
				own[strings.TrimPrefix(c, "name=")] = parts[2]
			}
		}
	}
	name := fmt.Sprintf("sandcheck-e2e-cgkill-%d-%d", os.Getpid(), time.Now().UnixNano())
	var dirs []string
	for _, h := range cgroupKillHierarchies {
		d := filepath.Join("/sys/fs/cgroup", h, own[h], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("making the run's cgroup: %v", err)
		}
		dirs = append(dirs, d)
	}
	t.Cleanup(func() {
		killCgroupTree(dirs)
		for _, d := range dirs {
			removeCgroupTree(t, d)
		}
	})
	return dirs
}

// removeCgroupTree removes a cgroup and the cgroups below it, deepest
// first, each bounded by 5 s (a killed process leaves its cgroup a moment
// after it is reaped).
func removeCgroupTree(t *testing.T, top string) {
	var all []string
	_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			all = append(all, p)
		}
		return nil
	})
	slices.Reverse(all)
	for _, d := range all {
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err = os.Remove(d); err == nil || os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("removing the test's cgroup %s: %v", d, err)
		}
	}
}

// killCgroupTree SIGKILLs every process in the cgroups dirs and the
// cgroups below them until none is left (at most 100 rounds 50 ms apart),
// as systemd's kill of a unit's cgroup does, and returns the processes it
// killed.
func killCgroupTree(dirs []string) map[int]bool {
	seen := map[int]bool{}
	for range 100 {
		var pids []int
		for _, top := range dirs {
			_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				for _, f := range strings.Fields(string(readSmall(filepath.Join(p, "cgroup.procs")))) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
						pids = append(pids, pid)
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			seen[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return seen
}

// inCgroups lists which of the cgroup folders dirs (or ones below them)
// process pid is in.
func inCgroups(pid int, dirs []string) []string {
	lines := strings.Split(string(readSmall(fmt.Sprintf("/proc/%d/cgroup", pid))), "\n")
	var in []string
	for _, d := range dirs {
		rel := strings.TrimPrefix(d, "/sys/fs/cgroup/")
		h, path, _ := strings.Cut(rel, "/")
		for _, line := range lines {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if slices.Contains(strings.Split(parts[1], ","), h) || slices.Contains(strings.Split(parts[1], ","), "name="+h) {
				if p := strings.TrimPrefix(parts[2], "/"); p == path || strings.HasPrefix(p, path+"/") {
					in = append(in, d)
				}
			}
		}
	}
	return in
}
