//go:build linux && amd64

package tracer

import (
	"os/exec"
	"testing"
)

// TestHostPIDSandboxWatchedByMountNS watches a runc sandbox that shares the
// host's pid namespace (docker run --pid host, as the weak reference does)
// and execs the known sequence into it twice: the watch is the container's
// mount namespace, each exec is a tree of its own found by its token, with
// exactly its own syscalls under Docker's default seccomp profile; the
// container's init is attributed from the watch on; a busy host process and the same
// sequence exec'd into a second, unwatched pid-host sandbox are attributed
// nowhere.
func TestHostPIDSandboxWatchedByMountNS(t *testing.T) {
	tr := newTracer(t)
	bin := buildSysloop(t)
	c := startContainer(t, "runc", bin, "--pid", "host")
	other := startContainer(t, "runc", bin, "--pid", "host")
	init := c.pid(t)
	w, err := tr.Watch(init, WatchOptions{})
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	if mnt, err := nsInode(init, "mnt"); err != nil || w.NS() != mnt {
		t.Errorf("the watch's key is %d, want the container's mount namespace %d (%v)", w.NS(), mnt, err)
	}
	if ok, err := w.Watching(init, init); !ok || err != nil {
		t.Errorf("the container's init (pid %d) is not attributed to the watch: %t, %v", init, ok, err)
	}
	host := exec.Command(bin, "loop", "5000")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	tok1, tok2, tok3 := token(), token(), token()
	c.exec(t, "/t/sysloop", "known", tok1)
	other.exec(t, "/t/sysloop", "known", tok3)
	c.exec(t, "/t/sysloop", "known", tok2)
	host.Wait()
	rep, err := w.Close()
	if err != nil {
		t.Fatalf("closing the watch: %v", err)
	}
	if rep.Scope != ScopeMount {
		t.Errorf("scope %q, want %q", rep.Scope, ScopeMount)
	}
	want := map[string]Count{
		"getppid": {Calls: 1234, OK: 1234},
		"setns":   {Calls: 7, EPERM: 7},
		"acct":    {Calls: 3, EPERM: 3},
		"unshare": {Calls: 1, EPERM: 1},
	}
	for _, tok := range []string{tok1, tok2} {
		tree := rep.TreeWithArg(tok)
		if tree == nil {
			t.Fatalf("no process tree exec'd with %s; %d trees\n%s", tok, len(rep.Trees), dump(rep))
		}
		if tree.Seeded || tree.Exe != "/t/sysloop" {
			t.Errorf("the exec's tree: seeded %t, exe %q; want a tree of its own rooted at /t/sysloop", tree.Seeded, tree.Exe)
		}
		for name, w := range want {
			if got := tree.Syscalls[name]; got != w {
				t.Errorf("exec %s: %s: the kernel saw %+v, want %+v", tok, name, got, w)
			}
		}
	}
	if rep.TreeWithArg(tok3) != nil {
		t.Errorf("the unwatched sandbox's exec (%s) was attributed to the watched one", tok3)
	}
	if got := rep.Syscalls()["getppid"].Calls; got != 2*1234 {
		t.Errorf("the watch counted %d getppid calls, want the two execs' 2468 (not the host's 5000 or the other sandbox's 1234)", got)
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
