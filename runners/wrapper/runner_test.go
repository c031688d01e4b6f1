package wrapper

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// startEnv starts a sandbox whose wrapper is env (the command runs as it
// is), with a probe whose list prints, and closes it at cleanup.
func startEnv(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	requireTool(t, "env", defaultPath)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runners.ProbeBinary), []byte("#!/bin/sh\necho hold; echo list\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if cfg.Argv == nil {
		cfg.Argv = []string{"env", VarArgv}
	}
	if cfg.Network == "" {
		cfg.Network = "none"
	}
	r, err := New(cfg, "../../fixtures/targets")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.Start(t.Context(), runners.SandboxSpec{Name: "t", ProbeDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(t.Context()); err != nil {
			t.Errorf("Close: %v", err)
		}
		left, err := sb.(*Sandbox).VerifyTeardown(t.Context())
		if err != nil || len(left) > 0 {
			t.Errorf("after Close: %v %v", left, err)
		}
	})
	return sb.(*Sandbox)
}

// The wrapper runs as the target's user in ${WORKDIR}, which it owns, with
// HOME there, the settings files in place and the probe folder read-only.
func TestWrapperEnvironment(t *testing.T) {
	sb := startEnv(t, Config{User: "nobody", Files: []File{{Source: "wrapper/srt-strict.json", Path: "conf/.srt-settings.json"}}})
	res, err := sb.Exec(t.Context(), []string{"/bin/sh", "-c", `id -u; pwd; echo "$HOME"; test -r conf/.srt-settings.json && echo readable; touch "$1/x" 2>/dev/null || echo probe-ro`, "sh", runners.ProbeMount})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	want := []string{"65534", sb.Workdir(), sb.Workdir(), "readable", "probe-ro"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("inside: %q (stderr %q), want %q", lines, res.Stderr, want)
	}
	fi, err := os.Stat(sb.Workdir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("workdir: %v %v", fi, err)
	}
}

// CopyIn writes only file names of ${WORKDIR}, and never through a link
// the box planted there.
func TestCopyInStaysInWorkdir(t *testing.T) {
	sb := startEnv(t, Config{User: "root"})
	src := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(sb.Workdir(), "link")); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"/etc/x", "../x", "a/b", "link", filepath.Join(sb.Workdir(), "..", "x")} {
		if err := sb.CopyIn(t.Context(), src, dst); err == nil {
			t.Errorf("CopyIn to %q succeeded", dst)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "host" {
		t.Errorf("the host file behind the box's link was written: %q", b)
	}
	if err := sb.CopyIn(t.Context(), src, filepath.Join(sb.Workdir(), "ok")); err != nil {
		t.Errorf("CopyIn into the workdir: %v", err)
	}
}

// A process the wrapper leaves behind is the sandbox's: it is in the
// cgroup, and Close ends it.
func TestLeftBehindProcessEndsWithTheSandbox(t *testing.T) {
	sb := startEnv(t, Config{User: "root"})
	res, err := sb.Exec(t.Context(), []string{"/bin/sh", "-c", "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $!"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	procs, err := sb.cgroup.Procs()
	if err != nil || len(procs) == 0 {
		t.Fatalf("the daemon left behind is not in the sandbox's cgroup: %v %v", procs, err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A killed process is gone, or a zombie its new parent has not reaped
	// yet, within a moment.
	for _, p := range procs {
		for deadline := time.Now().Add(5 * time.Second); alive(p); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("process %d outlived Close", p)
				break
			}
		}
	}
}

// alive reports whether pid runs (exists and is no zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// With network none, the wrapper's host side (and so any proxy of its own,
// such as srt's) is in a network namespace with only loopback: nothing it
// starts can reach past this machine.
func TestNetworkNoneIsLoopbackOnly(t *testing.T) {
	// The control: the host has more than loopback.
	host, err := os.ReadFile("/proc/net/dev")
	if err != nil || strings.Count(string(host), ":") < 2 {
		t.Skipf("the host itself has only loopback: the check would prove nothing (%v)", err)
	}
	sb := startEnv(t, Config{User: "nobody"})
	res, err := sb.Exec(t.Context(), []string{"/bin/cat", "/proc/net/dev"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	var ifaces []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if strings.Join(ifaces, ",") != "lo" {
		t.Errorf("interfaces in the wrapper's network namespace: %v, want only lo", ifaces)
	}
}

// With network proxy the wrapper is on the harness network, the probes are
// told that it filters through a proxy of its own, and it is not handed
// the harness's proxy to chain through; harness and none do neither.
func TestNetworkProxy(t *testing.T) {
	requireTool(t, "env", defaultPath)
	spec := map[string]string{"HTTP_PROXY": "http://gw:3128", "https_proxy": "http://gw:3128", "FOO": "1"}
	for _, tc := range []struct {
		network        string
		harness, proxy bool
	}{{"proxy", true, true}, {"harness", true, false}, {"none", false, false}} {
		t.Run(tc.network, func(t *testing.T) {
			r, err := New(Config{Argv: []string{"env", VarArgv}, User: "nobody", Network: tc.network,
				Proxies: []string{"http://u:p@localhost:3128", "socks5h://[::1]:1080"}}, ".")
			if err != nil {
				t.Fatal(err)
			}
			var p probes.Params
			r.FillParams(&p)
			if p.WrapperProxy != tc.proxy || r.UsesHarnessNetwork() != tc.harness {
				t.Errorf("WrapperProxy %t, UsesHarnessNetwork %t; want %t, %t", p.WrapperProxy, r.UsesHarnessNetwork(), tc.proxy, tc.harness)
			}
			// The declared proxies reach the probe, normalized, only
			// where the wrapper filters through them.
			want := []string(nil)
			if tc.proxy {
				want = []string{"http://127.0.0.1:3128", "socks5://[::1]:1080"}
			}
			if !slices.Equal(p.WrapperProxies, want) {
				t.Errorf("WrapperProxies %q, want %q", p.WrapperProxies, want)
			}
			env := strings.Join((&Sandbox{r: r, workdir: "/w"}).environ(spec), " ")
			if !strings.Contains(env, "FOO=1") {
				t.Errorf("environment %q lost FOO", env)
			}
			if got := strings.Contains(env, "HTTP_PROXY=") || strings.Contains(env, "https_proxy="); got == tc.proxy {
				t.Errorf("environment %q: harness proxy present %t with network %s", env, got, tc.network)
			}
		})
	}
	if _, err := New(Config{Argv: []string{"env", VarArgv}, User: "nobody", Network: "host"}, "."); err == nil {
		t.Error("network host was accepted")
	}
}

// stillHeld says whether pid is still the runner's shell waiting for its
// go-ahead: it has exec'd nothing yet.
func stillHeld(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := strings.Split(string(b), "\x00")
	return len(args) > 2 && args[0] == "/bin/sh" && strings.HasPrefix(args[2], "read -r go <&4")
}

// ExecTree holds the invocation's root shell until its watch returns: the
// watch gets the shell's host pid while nothing of the command has run (its
// mark is absent, the shell has exec'd nothing), and the command runs once
// it returns. A plain Exec holds nothing.
func TestExecTreeHoldsTheRootUntilWatched(t *testing.T) {
	sb := startEnv(t, Config{User: "nobody"})
	mark := filepath.Join(sb.Workdir(), "ran")
	var (
		root           int
		ranEarly, held bool
	)
	res, err := sb.ExecTree(t.Context(), []string{"/bin/sh", "-c", `echo $$ > ran; echo ok`}, func(pid int) {
		root = pid
		time.Sleep(200 * time.Millisecond) // time enough for an unheld command to run
		_, err := os.Stat(mark)
		ranEarly = err == nil
		held = stillHeld(pid)
	})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("ExecTree: %v, exit %d, stdout %q, stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if root <= 1 {
		t.Fatalf("the watch was given pid %d", root)
	}
	if ranEarly || !held {
		t.Errorf("the command ran before its watch returned (mark there %t, root still the held shell %t)", ranEarly, held)
	}
	// The command ran in the tree of the pid the watch was given: the
	// root shell exec'd through nsenter and setpriv into the command.
	b, err := os.ReadFile(mark)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(root) {
		t.Errorf("the command ran as pid %q (%v), want the watched root %d", b, err, root)
	}
	res, err = sb.Exec(t.Context(), []string{"/bin/sh", "-c", "echo plain"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "plain" {
		t.Errorf("Exec: %v, stdout %q", err, res.Stdout)
	}
}

// A task (SandboxSpec.Command) with SandboxSpec.Watch is held the same
// way: Start calls Watch with the task's root before the task runs.
func TestTaskHeldUntilWatched(t *testing.T) {
	requireTool(t, "env", defaultPath)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runners.ProbeBinary), []byte("#!/bin/sh\necho list\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Argv: []string{"env", VarArgv}, User: "root", Network: "none"}, "../../fixtures/targets")
	if err != nil {
		t.Fatal(err)
	}
	var root int
	var held bool
	spec := runners.SandboxSpec{Name: "t", ProbeDir: dir, Command: []string{"/bin/sh", "-c", `echo $$`},
		Watch: func(pid int) {
			root = pid
			time.Sleep(200 * time.Millisecond) // time enough for an unheld task to run
			held = stillHeld(pid)
		}}
	sb, err := r.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(t.Context())
	if !held {
		t.Errorf("the task ran before its watch returned")
	}
	res, err := sb.(runners.Waiter).Wait(t.Context())
	if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(root) || root <= 1 {
		t.Errorf("the task: %v, stdout %q, want the watched root %d", err, res.Stdout, root)
	}
}
