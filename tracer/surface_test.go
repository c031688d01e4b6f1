//go:build linux && amd64

package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runtimes whose host kernel surface the tests compare on one workload.
var surfaceRuntimes = []string{"runc", "runsc", "bwrap"}

// surfaceOf runs sysloop's known sequence in a sandbox of the given runtime,
// watched before the workload starts, and returns the tracer's report.
func surfaceOf(t testing.TB, tr *Tracer, runtime, sysloop string) *Report {
	t.Helper()
	if runtime == "bwrap" {
		return surfaceBwrap(t, tr, sysloop)
	}
	c := startContainer(t, runtime, sysloop)
	w, err := tr.Watch(c.pid(t), WatchOptions{Tree: runtime == "runsc"})
	if err != nil {
		t.Fatalf("watching the %s sandbox: %v", runtime, err)
	}
	c.exec(t, "/t/sysloop", "known", token())
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	return rep
}

// surfaceBwrap runs the workload under bubblewrap with every namespace
// unshared (no network) and nothing of the host but the workload's folder.
// The workload waits for a line on stdin, sent once the watch is on.
func surfaceBwrap(t testing.TB, tr *Tracer, sysloop string) *Report {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("needs bubblewrap (make setup installs it)")
	}
	cmd := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", filepath.Dir(sysloop), "/t",
		"--proc", "/proc", "--dev", "/dev", "/t/sysloop", "wait", "known")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting bwrap: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid, err := nsChild(cmd.Process.Pid, 5*time.Second)
	if err != nil {
		t.Fatalf("bwrap's sandbox: %v (output: %s)", err, out.String())
	}
	// bubblewrap's own setup (its mounts and pivot_root) runs in the
	// namespace before the workload; like a container runtime's init stage
	// it is not the workload's: only what execs after the watch counts.
	w, err := tr.Watch(pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching the bwrap sandbox: %v", err)
	}
	in.Write([]byte("go\n"))
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bwrap: %v: %s", err, out.String())
	}
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	return rep
}

// nsChild finds, within bound, a descendant of pid that lives in another pid
// namespace than pid: the first process of the sandbox pid started.
func nsChild(pid int, bound time.Duration) (int, error) {
	own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for _, d := range descendants(pid) {
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", d)); err == nil && ns != own {
				return d, nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("no process of %d entered a new pid namespace within %s", pid, bound)
}

// TestHostSurfacePerRuntime runs one workload under runc, gVisor and
// bubblewrap. On the shared-kernel runtimes the host kernel sees the
// workload's own calls (getppid x1234; acct reaches its code under bwrap,
// which installs no seccomp filter, and is refused under Docker's profile);
// under gVisor it sees only the sentry, and the workload's acct never
// reaches the host kernel's code.
func TestHostSurfacePerRuntime(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	sizes := map[string]int{}
	for _, rt := range surfaceRuntimes {
		rep := surfaceOf(t, tr, rt, bin)
		sys := rep.Syscalls()
		sizes[rt] = len(sys)
		switch rt {
		case "runc", "bwrap":
			if c := sys["getppid"]; c.Calls < 1234 {
				t.Errorf("%s: the kernel saw getppid %+v, want at least 1234 calls", rt, c)
			}
		case "runsc":
			if c := sys["acct"]; c.Reached() != 0 {
				t.Errorf("runsc: the workload's acct reached the host kernel's code: %+v", c)
			}
		}
		if rt == "runc" {
			if c := sys["acct"]; c.Calls == 0 || c.Reached() != 0 {
				t.Errorf("runc: acct %+v, want calls refused by the seccomp profile", c)
			}
		}
		// The surface is made of the counts, and attribution of the tasks:
		// events (the sentry's many opens and connects, past the report's
		// cap or a ring buffer a busy host did not drain) do not touch it.
		if l := rep.Lost; l.Tasks+l.Counts > 0 {
			t.Errorf("%s: lost %+v", rt, rep.Lost)
		}
		t.Logf("%s: host kernel surface %d distinct syscalls: %s", rt, len(sys), strings.Join(rep.Surface(), " "))
	}
	for _, rt := range surfaceRuntimes {
		if sizes[rt] == 0 {
			t.Errorf("%s: empty host surface", rt)
		}
	}
}

// BenchmarkHostSurface prints the host kernel surface (distinct host
// syscalls) of one workload per runtime. `make bench-tracer` runs it.
func BenchmarkHostSurface(b *testing.B) {
	tr, err := New(Options{})
	if err != nil {
		b.Skipf("needs root and BPF: %v", err)
	}
	defer tr.Close()
	bin := buildSysloop(b)
	for _, rt := range surfaceRuntimes {
		b.Run(rt, func(b *testing.B) {
			var n int
			for range b.N {
				n = len(surfaceOf(b, tr, rt, bin).Syscalls())
			}
			b.ReportMetric(float64(n), "host-syscalls")
		})
	}
}
