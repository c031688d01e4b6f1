//go:build linux && amd64

package tracer

import (
	"os"
	"os/exec"
	"testing"
)

// heldCommand starts argv the way the wrapper runner starts an invocation:
// a host shell in the tracer's own pid namespace, held at a go-ahead (a line
// on stdin) before it runs anything of the command, which it then execs.
func heldCommand(t *testing.T, argv ...string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r go && exec "$@"`, "sh"}, argv...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", argv, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, func() { in.Write([]byte("go\n")); in.Close() }
}

// TestWatchTreesFollowsEachHeldCommand watches a sandbox made of host
// process trees, one per command (a wrapper's invocations): two commands,
// each held until it is added, fork into new pid and network namespaces
// (unshare, as bubblewrap, firejail and srt do) and run the known sequence
// under a seccomp filter of their own. Each is its own tree, rooted at the
// held shell, with exactly its syscalls; the same command run beside them,
// never added, and a busy host process are attributed nowhere.
func TestWatchTreesFollowsEachHeldCommand(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("needs unshare (util-linux)")
		}
		t.Skip("needs unshare (util-linux)")
	}
	w, err := tr.WatchTrees(WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	defer w.Close()
	inv := func(tok string) []string {
		return []string{unshare, "--pid", "--net", "--fork", "--", bin, "seccomp", tok}
	}
	tok1, tok2, tok3 := token(), token(), token()
	c1, go1 := heldCommand(t, inv(tok1)...)
	c2, go2 := heldCommand(t, inv(tok2)...)
	c3, go3 := heldCommand(t, inv(tok3)...) // never added
	for _, c := range []*exec.Cmd{c1, c2} {
		if err := w.AddTree(c.Process.Pid); err != nil {
			t.Fatalf("adding the held command %d: %v", c.Process.Pid, err)
		}
	}
	host := exec.Command(bin, "loop", "5000")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*exec.Cmd{c1, c2, c3} {
		[]func(){go1, go2, go3}[i]()
		if err := c.Wait(); err != nil {
			t.Fatalf("command %d: %v", i+1, err)
		}
	}
	host.Wait()
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	const extra = 4
	if rep.Scope != ScopeTree || len(rep.Trees) != 2 {
		t.Fatalf("scope %q with %d trees, want %q with the two added commands'\n%s", rep.Scope, len(rep.Trees), ScopeTree, dump(rep))
	}
	// sysloop's getppid calls are 1234; the tools before it (sh, unshare)
	// may add one or two of their own.
	want := map[string]Count{
		"setns": {Calls: 7, OtherErr: 7},
		"acct":  {Calls: 3, EPERM: 3},
	}
	for _, c := range []*exec.Cmd{c1, c2} {
		tree := rep.Trees[uint32(c.Process.Pid)]
		if tree == nil {
			t.Fatalf("no tree rooted at the held command %d\n%s", c.Process.Pid, dump(rep))
		}
		for name, w := range want {
			if got := tree.Syscalls[name]; got != w {
				t.Errorf("command %d: %s: the kernel saw %+v, want %+v", c.Process.Pid, name, got, w)
			}
		}
		if got := tree.Syscalls["getppid"]; got.OK < 1234 || got.Calls > 1234+extra {
			t.Errorf("command %d: getppid: the kernel saw %+v, want sysloop's 1234 calls and at most %d more", c.Process.Pid, got, extra)
		}
		var sawUnshare, sawSysloop bool
		for _, ev := range tree.Events {
			switch {
			case ev.Kind == KindSyscall && ev.Syscall == "unshare" && ev.TGID == uint32(c.Process.Pid):
				sawUnshare = ev.Ret == 0
			case ev.Kind == KindExec && ev.Path == bin && ev.TGID != uint32(c.Process.Pid):
				sawSysloop = true // forked into the new pid namespace
			case ev.TGID == uint32(host.Process.Pid) || ev.TGID == uint32(c3.Process.Pid):
				t.Errorf("an unwatched process's event was attributed to the sandbox: %s", ev)
			}
		}
		if !sawUnshare || !sawSysloop {
			t.Errorf("command %d: unshare by the root %t, sysloop exec'd by its forked child %t; want both\n%s", c.Process.Pid, sawUnshare, sawSysloop, dump(rep))
		}
	}
	if got := rep.Syscalls()["getppid"].Calls; got > 2*(1234+extra) {
		t.Errorf("the watch counted %d getppid calls, want the two commands' 2468 (and at most %d more), not the third's 1234 or the host's 5000", got, 2*extra)
	}
	if rep.Lost.Any() {
		t.Errorf("lost: %+v", rep.Lost)
	}
}

// TestAddTreeRefuses: the tracer's own process, and a closed watch.
func TestAddTreeRefuses(t *testing.T) {
	tr := newTracer(t)
	w, err := tr.WatchTrees(WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	if err := w.AddTree(os.Getpid()); err == nil {
		t.Error("the tracer's own process was added to a watch")
	}
	other, err := tr.WatchTrees(WatchOptions{})
	if err != nil {
		t.Fatalf("a second watch of trees: %v", err)
	}
	if other.NS() == w.NS() || w.NS() < treeKeys {
		t.Errorf("watches of trees keyed %d and %d: want distinct keys past every pid", w.NS(), other.NS())
	}
	other.Close()
	c, _ := heldCommand(t, "true")
	w.Close()
	if err := w.AddTree(c.Process.Pid); err == nil {
		t.Error("a process was added to a closed watch")
	}
}
