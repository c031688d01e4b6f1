//go:build linux && amd64

package tracer

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/cilium/ebpf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newTracer loads the tracer or skips: it needs root and BPF, which CI has.
func newTracer(t *testing.T) *Tracer {
	t.Helper()
	tr, err := New(Options{})
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skipf("needs root and BPF: %v", err)
	}
	if err != nil {
		t.Fatalf("loading the tracer: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("closing the tracer: %v", err)
		}
	})
	return tr
}

// buildSysloop builds the static test workload once per test binary.
func buildSysloop(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sysloop")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/sysloop")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building sysloop: %v\n%s", err, b)
	}
	return out
}

// startInNewPidNS starts argv in a new pid namespace, holding it at a
// go-ahead: it reads one line from stdin before doing anything.
func startInNewPidNS(t *testing.T, bin string, args ...string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s in a new pid namespace: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, func() { in.Write([]byte("go\n")); in.Close() }
}

// finish waits for the watched command to end and returns the watch's final
// report.
func finish(t *testing.T, cmd *exec.Cmd, w *Watch) *Report {
	t.Helper()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sysloop: %v", err)
	}
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	return rep
}

func TestKnownSequenceCountsAndErrnos(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	cmd, goAhead := startInNewPidNS(t, bin, "wait", "seccomp")
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	// A busy host process meanwhile must not be attributed.
	other := exec.Command(bin, "loop", "5000")
	goAhead()
	if err := other.Run(); err != nil {
		t.Fatal(err)
	}
	rep := finish(t, cmd, w)
	sys := rep.Syscalls()
	if c := sys["getppid"]; c.Calls != 1234 || c.OK != 1234 {
		t.Errorf("getppid: got %+v, want exactly 1234 successful calls (the host process's 5000 must not count)", c)
	}
	if c := sys["setns"]; c.Calls != 7 || c.OtherErr != 7 {
		t.Errorf("setns(-1): got %+v, want 7 calls failing with EBADF (reached, not denied)", c)
	}
	if c := sys["acct"]; c.Calls != 3 || c.EPERM != 3 || c.Denied() != 3 {
		t.Errorf("acct under a seccomp filter: got %+v, want 3 calls denied with EPERM", c)
	}
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
	var sawExec, sawOpen, sawConnect, sawUnshare, sawSetns bool
	for _, tree := range rep.Trees {
		for _, ev := range tree.Events {
			switch {
			case ev.Kind == KindSyscall && ev.Syscall == "setns":
				// Seven alike calls: one event, counted seven times.
				if sawSetns || ev.Calls != 7 || ev.Errno != "EBADF" {
					t.Errorf("setns: %s, want one event for its 7 calls failing with EBADF", ev)
				}
				sawSetns = true
			case ev.Kind == KindExec && ev.Path == bin:
				sawExec = len(ev.Argv) == 2 && ev.Argv[1] == "seccomp"
			case ev.Kind == KindSyscall && ev.Syscall == "openat" && ev.Path == "/etc/shadow.sandcheck-test":
				sawOpen = ev.Errno == "ENOENT"
			case ev.Kind == KindSyscall && ev.Syscall == "connect" && ev.Addr != nil:
				sawConnect = ev.Addr.String() == "127.0.0.1:9"
			case ev.Kind == KindSyscall && ev.Syscall == "unshare":
				sawUnshare = ev.Ret == 0
			case ev.TGID == uint32(other.Process.Pid):
				t.Errorf("host process event attributed to the sandbox: %s", ev)
			}
		}
	}
	if !sawExec || !sawOpen || !sawConnect || !sawUnshare || !sawSetns {
		t.Errorf("events: exec %t, sensitive open %t, connect 127.0.0.1:9 %t, unshare %t, setns %t; all should be seen\n%s",
			sawExec, sawOpen, sawConnect, sawUnshare, sawSetns, dump(rep))
	}
}

// TestEveryDistinctSyscallCountedExactly makes more distinct syscalls, in
// rotation, than the kernel side's per-CPU hot counters hold, so counters
// keep moving to their slot: each must still come out exact.
func TestEveryDistinctSyscallCountedExactly(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	const rounds = 3000
	cmd, goAhead := startInNewPidNS(t, bin, "wait", "mix", strconv.Itoa(rounds))
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	goAhead()
	rep := finish(t, cmd, w)
	sys := rep.Syscalls()
	// The queries succeed; the calls on descriptor -1 fail with EBADF, and
	// those given a NULL buffer with EFAULT.
	// The Go runtime itself also calls prctl and close a few times.
	queries := []string{"getppid", "getuid", "geteuid", "getgid", "getegid", "getpgrp", "getsid",
		"getpgid", "getgroups", "getpriority", "sched_getscheduler", "sched_get_priority_max",
		"sched_get_priority_min", "personality", "prctl", "ioprio_get", "getcpu", "times", "umask", "alarm"}
	failing := []string{"getresuid", "getresgid", "getitimer", "setns", "syncfs", "fsync", "dup", "close", "fchdir", "flock", "fdatasync",
		"listen", "shutdown", "getsockname", "getpeername"}
	for _, name := range append(queries, failing...) {
		c := sys[name]
		got := c.OK
		if slices.Contains(failing, name) {
			got = c.OtherErr
		}
		if got != rounds || (c.Calls != rounds && name != "prctl" && name != "close") {
			t.Errorf("%s: the kernel side counted %+v, want exactly %d calls (succeeding for a query, failing for descriptor -1 or a NULL buffer)", name, c, rounds)
		}
	}
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
}

// TestWatchCountsABusyProcessFromItsStart watches a process that is busy
// making syscalls (so the CPU it runs on remembers it as unwatched): from
// the watch on, its calls count.
func TestWatchCountsABusyProcessFromItsStart(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	cmd := exec.Command(bin, "hold", "1234")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("sysloop hold: %q, %v", line, err)
	}
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	rep := finish(t, cmd, w)
	sys := rep.Syscalls()
	if c := sys["getppid"]; c.Calls != 1234 || c.OK != 1234 {
		t.Errorf("getppid: got %+v, want exactly the 1234 calls made after the watch began", c)
	}
	if sys["getuid"].Calls == 0 {
		t.Errorf("getuid: no call counted, though the loop went on for over a second after the watch began")
	}
}

func TestWatchRefusesHostNamespace(t *testing.T) {
	tr := newTracer(t)
	if _, err := tr.Watch(os.Getpid(), WatchOptions{}); err == nil {
		t.Fatal("watching the host's own pid namespace should be refused")
	}
}

func TestNothingStaysLoaded(t *testing.T) {
	tr := newTracer(t)
	// Only the programs this tracer loaded count: another tracer on the
	// machine (a concurrent run, a benchmark being unloaded) has other IDs.
	ids := map[ebpf.ProgramID]string{}
	for _, p := range []*ebpf.Program{tr.objs.ScSysExit, tr.objs.ScExec, tr.objs.ScFork, tr.objs.ScExit} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, ok := info.ID()
		if !ok {
			t.Fatal("the kernel reports no program ID")
		}
		ids[id] = info.Name
	}
	loaded := ourPrograms(t)
	for id, name := range ids {
		if loaded[id] != name {
			t.Fatalf("program %s (id %d) is not listed as loaded while the tracer is open", name, id)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	still := func() []string {
		var left []string
		now := ourPrograms(t)
		for id, name := range ids {
			if now[id] == name {
				left = append(left, fmt.Sprintf("%s (id %d)", name, id))
			}
		}
		return left
	}
	// The kernel frees detached programs after an RCU grace period: wait,
	// bounded.
	deadline := time.Now().Add(10 * time.Second)
	for len(still()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := still(); len(left) > 0 {
		t.Fatalf("programs still loaded after Close: %v", left)
	}
}

func dump(r *Report) string {
	var b strings.Builder
	for _, t := range r.Trees {
		for _, ev := range t.Events {
			b.WriteString(ev.String() + "\n")
		}
	}
	return b.String()
}

// TestAlikeCallsCountedInKernel makes more kinds of interesting calls (opens
// of distinct sensitive paths, twice each) than a tree may stream: the first
// of each kind is an event standing for both calls, the kinds past the
// tree's budget are counted without an event, and nothing is lost.
func TestAlikeCallsCountedInKernel(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	const kinds = 1500
	cmd, goAhead := startInNewPidNS(t, bin, "wait", "kinds", strconv.Itoa(kinds))
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	goAhead()
	rep := finish(t, cmd, w)
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
	var streamed, itemized, calls uint64
	var unitemized uint64
	for _, tree := range rep.Trees {
		unitemized += tree.Unitemized["openat"]
		for _, ev := range tree.Events {
			if ev.Kind != KindSyscall {
				continue
			}
			streamed++
			if ev.Syscall == "openat" && strings.HasPrefix(ev.Path, "/etc/shadow.sandcheck-kinds-") {
				itemized++
				calls += ev.Calls
				if ev.Calls != 2 || ev.Errno != "ENOENT" {
					t.Errorf("%s: want one event for its 2 calls, failing with ENOENT", ev)
				}
			}
		}
	}
	if streamed > treeEvents {
		t.Errorf("the tree streamed %d syscall events, past its budget of %d", streamed, treeEvents)
	}
	if itemized < treeEvents-16 {
		t.Errorf("only %d kinds itemized, want about the budget (%d)", itemized, treeEvents)
	}
	if calls+unitemized != 2*kinds {
		t.Errorf("itemized opens stand for %d calls, unitemized %d: want %d in all", calls, unitemized, 2*kinds)
	}
	if c := rep.Syscalls()["openat"]; c.Calls < 2*kinds {
		t.Errorf("openat counted %+v, want at least %d calls", c, 2*kinds)
	}
}

// TestSensitivePrefixesMatch opens paths around the configured prefixes
// (shorter and longer than the kernel side's 8-byte head, relative ones,
// near misses): exactly the absolute paths under a prefix are events.
func TestSensitivePrefixesMatch(t *testing.T) {
	want := []string{"/ab", "/abc", "/root/x", "/etc/shadow", "/etc/shadow-", "/nonexistent-sandcheck/long/prefix/f"}
	not := []string{"/a", "/root", "/rootx/y", "/etc/shado", "/etc/passwd", "ab", "root/x", "etc/shadow",
		"/nonexistent-sandcheck/long/prefiX/f", "/nonexistent-sandcheck/long/prefix"}
	got, _ := sensitiveOpens(t, []string{"/ab", "/root/", "/etc/shadow", "/nonexistent-sandcheck/long/prefix/"}, "open", append(want, not...))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sensitive opens seen: %q, want %q", got, want)
	}
	if _, err := New(Options{SensitivePrefixes: []string{"etc/"}}); err == nil {
		t.Error("a relative prefix (never matched) should be refused")
	}
}

// TestOpensFromADirectoryNotRead opens sensitive names relative to a
// directory descriptor, as a walk through a tree does: the tracer does not
// read such paths, so they make no events at all (neither a sensitive open
// nor an open without its path), while the descriptor's own open is read
// and, not sensitive, makes none either.
func TestOpensFromADirectoryNotRead(t *testing.T) {
	_, rep := sensitiveOpens(t, []string{"/etc/shadow", "/root/"}, "openat", []string{"etc/shadow", "root/x", "etc/passwd"})
	for _, tree := range rep.Trees {
		for _, ev := range tree.Events {
			if ev.Kind == KindSyscall && (ev.Syscall == "openat" || ev.Syscall == "open") {
				t.Errorf("an open from a directory descriptor made an event: %s", ev)
			}
		}
	}
	if rep.Syscalls()["openat"].Calls < 4 {
		t.Errorf("the kernel side counted %+v openat calls, want at least the 4 sysloop made", rep.Syscalls()["openat"])
	}
}

// sensitiveOpens loads a tracer watching for prefixes, runs sysloop's mode
// (open, openat or pageend) over paths in a new PID namespace under it, and returns
// the openat events' paths, sorted, and the report.
func sensitiveOpens(t *testing.T, prefixes []string, mode string, paths []string) ([]string, *Report) {
	t.Helper()
	tr, err := New(Options{SensitivePrefixes: prefixes})
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skipf("needs root and BPF: %v", err)
	}
	if err != nil {
		t.Fatalf("loading the tracer: %v", err)
	}
	defer tr.Close()
	bin := buildSysloop(t)
	cmd, goAhead := startInNewPidNS(t, bin, append([]string{"wait", mode}, paths...)...)
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	goAhead()
	rep := finish(t, cmd, w)
	var got []string
	for _, tree := range rep.Trees {
		for _, ev := range tree.Events {
			if ev.Kind == KindSyscall && ev.Syscall == "openat" {
				got = append(got, ev.Path)
			}
		}
	}
	slices.Sort(got)
	return got, rep
}

// TestSensitivePathAtPageEnd opens short paths whose NUL ends a page before
// an inaccessible one, where the kernel side cannot read the path's first
// word alone: those under a prefix are events all the same.
func TestSensitivePathAtPageEnd(t *testing.T) {
	want := []string{"/ab", "/abc", "/root/x"}
	not := []string{"/a", "/root", "ab", "/b"}
	got, rep := sensitiveOpens(t, []string{"/ab", "/root/"}, "pageend", append(want, not...))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sensitive opens at a page's end seen: %q, want %q", got, want)
	}
	if c := rep.Syscalls()["openat"]; c.Calls < uint64(len(want)+len(not)) {
		t.Errorf("openat counted %+v, want at least %d calls", c, len(want)+len(not))
	}
}

// TestHotDataLayout holds the layout the sys_exit program relies on: the
// membership generation's two shares (gen, ugen) are the first two words
// of their section, read as one 8-byte load, and the section's variables,
// the event-worthy syscalls' bitmap included, fit one cache line.
func TestHotDataLayout(t *testing.T) {
	spec, err := loadTracer()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"gen": 0, "ugen": 4, "arg_bits": 8}
	for name, off := range want {
		v := spec.Variables[name]
		if v == nil {
			t.Fatalf("no variable %s in the BPF object", name)
		}
		if v.SectionName != ".data.hot" || v.Offset != off {
			t.Errorf("%s: section %s offset %d, want .data.hot offset %d", name, v.SectionName, v.Offset, off)
		}
	}
	for name, v := range spec.Variables {
		if v.SectionName == ".data.hot" && v.Offset+v.Size() > 64 {
			t.Errorf("%s ends at byte %d of .data.hot, past its first cache line", name, v.Offset+v.Size())
		}
	}
	if _, err := argSyscallBits(); err != nil {
		t.Error(err)
	}
}

// TestFilterCallsCountedPastTheBudget (issue 40 item 1): a tree that
// spends its event budget first still has its seccomp and prctl calls
// counted by first argument, so a filter asked for after a flood is known.
func TestFilterCallsCountedPastTheBudget(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	cmd, goAhead := startInNewPidNS(t, bin, "wait", "kindsfilter", "1100")
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{SkipRunning: true})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	goAhead()
	rep := finish(t, cmd, w)
	var tree *Tree
	for _, tt := range rep.Trees {
		if tt.Syscalls["openat"].Calls >= 2200 {
			tree = tt
		}
	}
	if tree == nil {
		t.Fatalf("no tree made the 2,200 opens: %+v", rep.Trees)
	}
	if !tree.OverBudget || tree.Seeded {
		t.Errorf("tree over budget %v, seeded %v; want spent and not seeded", tree.OverBudget, tree.Seeded)
	}
	sc, scTotal := tree.FirstArgCalls("seccomp")
	pr, prTotal := tree.FirstArgCalls("prctl")
	if sc[1] != 1 || pr[unix.PR_SET_SECCOMP] != 1 || pr[unix.PR_GET_DUMPABLE] != 1 {
		t.Errorf("seccomp by first argument %v, prctl %v; want SECCOMP_SET_MODE_FILTER, PR_SET_SECCOMP and PR_GET_DUMPABLE once each", sc, pr)
	}
	if scTotal != tree.Syscalls["seccomp"].Calls || prTotal != tree.Syscalls["prctl"].Calls {
		t.Errorf("kinds account for %d seccomp and %d prctl calls, the counts say %+v and %+v", scTotal, prTotal, tree.Syscalls["seccomp"], tree.Syscalls["prctl"])
	}
	for _, ev := range tree.Events {
		if ev.Kind == KindSyscall && (ev.Syscall == "seccomp" || ev.Syscall == "prctl" && ev.Args[0] == unix.PR_SET_SECCOMP) {
			t.Errorf("%s was itemized past the budget", ev)
		}
	}
}

// TestWatchingSeededProcesses: a process running when the watch began is
// seeded as a tree of its own, and the watch says it attributes its
// threads; the harness's own process it does not.
func TestWatchingSeededProcesses(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	cmd := exec.Command(bin, "hold", "10")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("waiting for ready: %v", err)
	}
	w, err := tr.Watch(cmd.Process.Pid, WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	pid := cmd.Process.Pid
	tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if len(tids) == 0 {
		t.Fatal("no threads")
	}
	for _, e := range tids {
		tid, _ := strconv.Atoi(e.Name())
		if ok, err := w.Watching(pid, tid); err != nil || !ok {
			t.Errorf("thread %d of the seeded process: watching %v, %v; want true", tid, ok, err)
		}
	}
	if ok, err := w.Watching(os.Getpid(), os.Getpid()); err != nil || ok {
		t.Errorf("the harness itself: watching %v, %v; want false", ok, err)
	}
	rep := finish(t, cmd, w)
	if tree := rep.Trees[uint32(pid)]; tree == nil || !tree.Seeded {
		t.Errorf("the process running at the watch's start: tree %+v, want seeded", tree)
	}
}
