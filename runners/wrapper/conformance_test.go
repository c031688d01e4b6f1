package wrapper

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
)

// srtBin is where scripts/setup.sh installs the pinned srt.
const srtBin = "/opt/sandcheck/srt/node_modules/.bin"

// bwrapArgv is bubblewrap invoked by hand as a wrapper: the host's /usr
// read-only, fresh /proc, /dev and /tmp, the probe folder read-only and
// ${WORKDIR} writable, every namespace unshared.
var bwrapArgv = []string{"bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
	"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
	"--ro-bind", VarProbeDir, VarProbeDir, "--bind", VarWorkdir, VarWorkdir, "--chdir", VarWorkdir,
	"--unshare-all", "--die-with-parent", "--new-session", "--", VarArgv}

// requireTool skips unless the test runs as root with the wrapper
// installed; under CI=true (where make setup installed every tool) a
// missing tool fails instead, so no skip hides a failure there.
func requireTool(t *testing.T, prog, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the wrapper runner makes cgroups, mounts and network namespaces: needs root")
	}
	if _, err := lookPath(prog, path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("needs %s (make setup installs it): %v", prog, err)
	}
}

// conformance runs the runner conformance suite with cfg.
func conformance(t *testing.T, cfg Config) {
	requireTool(t, cfg.Argv[0], cfg.path())
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r, err := New(cfg, ".")
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return r
		},
		// CopyIn writes into ${WORKDIR}, the wrappers' working folder.
		CopyPath: "conformance-copy",
	})
}

func TestConformanceBwrap(t *testing.T) {
	for _, user := range []string{"root", "nobody"} {
		t.Run(user, func(t *testing.T) {
			conformance(t, Config{Argv: bwrapArgv, User: user, Network: "none"})
		})
	}
}

func TestConformanceSrt(t *testing.T) {
	path := srtBin + ":" + defaultPath
	for _, user := range []string{"root", "nobody"} {
		t.Run(user, func(t *testing.T) {
			conformance(t, Config{Argv: []string{"srt", "-c", VarArgvShell}, User: user, Network: "none",
				Env: map[string]string{"PATH": path}})
		})
	}
}

func TestConformanceFirejail(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"default", []string{"firejail", "--quiet", "--deterministic-shutdown", "--", VarArgv}},
		{"strict", []string{"firejail", "--quiet", "--deterministic-shutdown", "--noprofile", "--net=none", "--caps.drop=all", "--seccomp", "--noroot",
			"--nonewprivs", "--rlimit-nproc=512", "--rlimit-nofile=1024", "--", VarArgv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, Config{Argv: tc.argv, User: "root", Network: "none"})
		})
	}
}

// A wrapper that exits 0 without running the command, or prints nothing,
// is refused at Start with one error naming what happened, never a
// sandbox that passes; the same probe through a wrapper that runs it
// starts (the control).
func TestWrapperThatRunsNothing(t *testing.T) {
	requireTool(t, "true", defaultPath)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A probe whose list prints, as the real one's does.
	if err := os.WriteFile(dir+"/"+runners.ProbeBinary, []byte("#!/bin/sh\necho hold; echo list\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"env", VarArgv}, true},
		{[]string{"sh", "-c", VarArgvShell}, true},
		{[]string{"true", VarArgv}, false},
		{[]string{"sh", "-c", "exit 0", VarArgvShell}, false},
		{[]string{"sh", "-c", ">/dev/null " + VarArgvShell}, false},
		// A banner, then no command run: the banner is not the list.
		{[]string{"sh", "-c", "echo 'sandbox ready: starting your command'", VarArgvShell}, false},
		// A banner beside the list is not the list either: the wrapper's
		// own words would reach every probe's output.
		{[]string{"sh", "-c", "echo 'wrapper 1.0 (c) someone'; " + VarArgvShell}, false},
	} {
		r, err := New(Config{Argv: tc.argv, User: "root", Network: "none"}, ".")
		if err != nil {
			t.Fatal(err)
		}
		sb, err := r.Start(t.Context(), runners.SandboxSpec{Name: "nothing", ProbeDir: dir})
		if tc.ok {
			if err != nil {
				t.Errorf("%v (the control): Start: %v", tc.argv, err)
			} else if err := sb.Close(t.Context()); err != nil {
				t.Errorf("%v: Close: %v", tc.argv, err)
			}
			continue
		}
		if err == nil {
			sb.Close(t.Context())
			t.Errorf("%v: Start succeeded", tc.argv)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrNotRun) || !errors.Is(err, runners.ErrStart) || strings.Count(msg, ErrNotRun.Error()) != 1 {
			t.Errorf("%v: Start error %q, want one naming %q once", tc.argv, msg, ErrNotRun)
		}
	}
}
