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
// process trees, one per command (a wrapper's invocations), with the
// workload's binary as the root file: two commands, each held until it is
// added, run the known sequence under a seccomp filter of their own, one
// forked into new pid and network namespaces (unshare, as bubblewrap,
// firejail and srt do), one exec'd by the held process itself. Each
// command's held tree keeps what started the workload (unshare's own
// unshare call); the workload is a tree of its own, found by its token,
// with exactly its syscalls. The same command run beside them, never
// added, and a busy host process are attributed nowhere.
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
	w, err := tr.WatchTrees(WatchOptions{RootExec: bin})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	defer w.Close()
	tok1, tok2, tok3 := token(), token(), token()
	c1, go1 := heldCommand(t, unshare, "--pid", "--net", "--fork", "--", bin, "seccomp", tok1)
	c2, go2 := heldCommand(t, bin, "seccomp", tok2)
	c3, go3 := heldCommand(t, unshare, "--pid", "--net", "--fork", "--", bin, "seccomp", tok3) // never added
	var held []uint32
	for _, c := range []*exec.Cmd{c1, c2} {
		root, err := w.AddTree(c.Process.Pid)
		if err != nil {
			t.Fatalf("adding the held command %d: %v", c.Process.Pid, err)
		}
		held = append(held, root)
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
	if rep.Scope != ScopeTree || len(rep.Trees) != 4 {
		t.Fatalf("scope %q with %d trees, want %q with the two held commands' and their workloads'\n%s", rep.Scope, len(rep.Trees), ScopeTree, dump(rep))
	}
	want := map[string]Count{
		"getppid": {Calls: 1234, OK: 1234},
		"setns":   {Calls: 7, OtherErr: 7},
		"acct":    {Calls: 3, EPERM: 3},
	}
	for i, tok := range []string{tok1, tok2} {
		tree := rep.TreeWithArg(tok)
		if tree == nil || tree.Held || tree.Exe != bin {
			t.Fatalf("command %d: no tree of its own for the workload exec'd with %s\n%s", i+1, tok, dump(rep))
		}
		for name, w := range want {
			if got := tree.Syscalls[name]; got != w {
				t.Errorf("command %d's workload: %s: the kernel saw %+v, want %+v", i+1, name, got, w)
			}
		}
		for _, ev := range tree.Events {
			if ev.TGID == uint32(host.Process.Pid) || ev.TGID == uint32(c3.Process.Pid) {
				t.Errorf("an unwatched process's event was attributed to the sandbox: %s", ev)
			}
		}
		h := rep.Trees[held[i]]
		if h == nil || !h.Held {
			t.Fatalf("command %d: no held tree %d\n%s", i+1, held[i], dump(rep))
		}
		if h.Syscalls["acct"].Calls != 0 || h.Syscalls["getppid"].Calls > 4 {
			t.Errorf("command %d: the held tree counted the workload's calls: acct %+v, getppid %+v", i+1, h.Syscalls["acct"], h.Syscalls["getppid"])
		}
	}
	// unshare(1) made its namespaces in the held tree, not the workload's.
	if c := rep.Trees[held[0]].Syscalls["unshare"]; c.OK != 1 {
		t.Errorf("command 1's held tree: unshare %+v, want unshare(1)'s one successful call", c)
	}
	if got := rep.Syscalls()["getppid"].Calls; got > 2*1234+8 {
		t.Errorf("the watch counted %d getppid calls, want the two workloads' 2468 (and a few of the tools'), not the third's 1234 or the host's 5000", got)
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
	if _, err := w.AddTree(os.Getpid()); err == nil {
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
	if _, err := w.AddTree(c.Process.Pid); err == nil {
		t.Error("a process was added to a closed watch")
	}
}
