//go:build linux && amd64

package tracer

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runnerImage is the first-party runner image (FROM scratch + busybox).
const runnerImage = "sandcheck/runner:dev"

// container is one sandbox started through the Docker CLI, the same engine
// and runtimes sandcheck's docker runner uses.
type container struct {
	t  *testing.T
	id string
}

// startContainer starts an idle sandbox with sysloop mounted at /t, or
// skips when Docker, the image or the runtime is missing (CI has them).
func startContainer(t testing.TB, runtime, sysloop string, extra ...string) *container {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("needs docker")
	}
	if err := exec.Command("docker", "image", "inspect", runnerImage).Run(); err != nil {
		t.Skipf("needs the image %s (make images)", runnerImage)
	}
	args := append([]string{"run", "-d", "--rm", "--runtime", runtime, "--network", "none",
		"--label", "sandcheck.test=tracer", "-v", filepath.Dir(sysloop) + ":/t:ro"}, extra...)
	out, err := exec.Command("docker", append(args, runnerImage, "/bin/busybox", "sleep", "600")...).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unknown or invalid runtime") {
			t.Skipf("needs the %s runtime: %s", runtime, out)
		}
		t.Fatalf("starting a %s sandbox: %v: %s", runtime, err, out)
	}
	c := &container{id: strings.TrimSpace(string(out))}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", c.id).Run() })
	return c
}

// pid is the sandbox's init as the engine reports it (State.Pid).
func (c *container) pid(t testing.TB) int {
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", c.id).Output()
	if err != nil {
		t.Fatalf("inspecting %s: %v", c.id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		t.Fatalf("inspecting %s: State.Pid %q", c.id, out)
	}
	return pid
}

func (c *container) exec(t testing.TB, argv ...string) string {
	out, err := exec.Command("docker", append([]string{"exec", c.id}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %v: %v: %s", argv, err, out)
	}
	return strings.TrimSpace(string(out))
}

func token() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "tok" + hex.EncodeToString(b)
}

// TestSandboxKnownSequence execs a known syscall sequence into a runc
// sandbox under Docker's default seccomp profile and checks the kernel's
// view of exactly that exec: counts, the seccomp refusals (setns, acct and
// unshare are denied with EPERM), and nothing of a busy host process.
func TestSandboxKnownSequence(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	c := startContainer(t, "runc", bin)
	w, err := tr.Watch(c.pid(t), WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	tok := token()
	host := exec.Command(bin, "loop", "5000")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	c.exec(t, "/t/sysloop", "known", tok)
	host.Wait()
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	tree := rep.TreeWithArg(tok)
	if tree == nil {
		t.Fatalf("no process tree exec'd with %s; trees: %d\n%s", tok, len(rep.Trees), dump(rep))
	}
	want := map[string]Count{
		"getppid": {Calls: 1234, OK: 1234},
		"setns":   {Calls: 7, EPERM: 7},
		"acct":    {Calls: 3, EPERM: 3},
		"unshare": {Calls: 1, EPERM: 1},
	}
	for name, w := range want {
		if got := tree.Syscalls[name]; got != w {
			t.Errorf("%s: the kernel saw %+v, want %+v", name, got, w)
		}
	}
	if tree.Exe != "/t/sysloop" {
		t.Errorf("tree root exec'd %q, want /t/sysloop", tree.Exe)
	}
	for _, tr := range rep.Trees {
		for _, ev := range tr.Events {
			if ev.TGID == uint32(host.Process.Pid) {
				t.Errorf("a host process's event was attributed to the sandbox: %s", ev)
			}
		}
	}
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
}

// TestSandboxSurfaceRunsc checks that a gVisor sandbox is watched through
// its sentry: the host sees the sentry's syscalls, not the workload's.
func TestSandboxSurfaceRunsc(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	c := startContainer(t, "runsc", bin)
	w, err := tr.Watch(c.pid(t), WatchOptions{Tree: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	c.exec(t, "/t/sysloop", "known", token())
	rep, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	sys := rep.Syscalls()
	if len(sys) == 0 {
		t.Fatal("the sentry made no host syscall while a probe ran")
	}
	// With the systrap platform the workload runs in stub processes below
	// the sentry; their syscalls hit the stubs' own seccomp filter on the
	// host and never reach kernel code.
	if c := sys["acct"]; c.Reached() != 0 {
		t.Errorf("the workload's acct reached the host kernel's code under gVisor: %+v", c)
	}
	t.Logf("runsc host surface: %d distinct syscalls: %v", len(rep.Surface()), rep.Surface())
}

// TestSentryCallsCountedInKernel runs a syscall-heavy workload (a walk
// through a 512-file tree, then the known sequence) in a gVisor sandbox.
// Its sentry drives the workload's stubs with tens of thousands of ptrace
// calls, more than the ring buffer holds: each kind must be one event
// counting the rest, the counts must add up, and nothing may be lost.
func TestSentryCallsCountedInKernel(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	c := startContainer(t, "runsc", bin)
	w, err := tr.Watch(c.pid(t), WatchOptions{Tree: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	c.exec(t, "/t/sysloop", "tree", "3")
	c.exec(t, "/t/sysloop", "known", token())
	rep, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
	events := 0
	var itemized, unitemized uint64
	for _, tree := range rep.Trees {
		unitemized += tree.Unitemized["ptrace"]
		for _, ev := range tree.Events {
			if ev.Kind != KindSyscall {
				continue
			}
			events++
			if ev.Syscall == "ptrace" {
				itemized += ev.Calls
			}
		}
	}
	pt := rep.Syscalls()["ptrace"]
	// The ring buffer holds about 6,600 events: the load must exceed it
	// for the test to mean anything.
	if pt.Calls < 20000 {
		t.Fatalf("the sentry made %d ptrace calls, want a load past the ring buffer's size (is runsc on the ptrace platform?)", pt.Calls)
	}
	if itemized+unitemized != pt.Calls {
		t.Errorf("ptrace events stand for %d calls and %d are unitemized, want the %d the kernel counted", itemized, unitemized, pt.Calls)
	}
	if events > 200 {
		t.Errorf("%d syscall events streamed for %d ptrace calls: alike calls should be counted in the kernel", events, pt.Calls)
	}
	t.Logf("%d ptrace calls; %d syscall events streamed in all", pt.Calls, events)
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
