package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

func TestClientNegotiatesAPIVersion(t *testing.T) {
	requireEngine(t)
	ctx := context.Background()
	cli := engineClient(t)
	ping, err := cli.Ping(ctx, client.PingOptions{})
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	want := ping.APIVersion
	if versionLess(client.MaxAPIVersion, want) {
		want = client.MaxAPIVersion
	}
	if got := cli.ClientVersion(); got != want {
		t.Errorf("client speaks API %s, want %s (engine %s, client max %s)", got, want, ping.APIVersion, client.MaxAPIVersion)
	}
}

// versionLess compares "1.41"-style versions.
func versionLess(a, b string) bool {
	var am, an, bm, bn int
	_, _ = fmt.Sscanf(a, "%d.%d", &am, &an)
	_, _ = fmt.Sscanf(b, "%d.%d", &bm, &bn)
	return am < bm || (am == bm && an < bn)
}

func TestSandboxLifecycle(t *testing.T) {
	requireEngine(t)
	probes := fakeProbe(t)
	for _, runtime := range []string{"runc", "runsc"} {
		for _, tc := range []struct {
			name string
			cfg  targets.Docker
		}{
			{"hardened", hardened(runtime)},
			{"weak", weak(runtime)},
		} {
			t.Run(runtime+"/"+tc.name, func(t *testing.T) {
				requireRuntime(t, runtime)
				spec, _ := testSpec(t, probes)
				sb := start(t, tc.cfg, spec)

				if res := run(t, sb, "/.sandcheck/sandcheck-probe", "list"); res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "hold") {
					t.Errorf("probe list: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if res := run(t, sb, "/.sandcheck/sandcheck-probe", "exit", "7"); res.ExitCode != 7 {
					t.Errorf("exit 7 gave exit code %d", res.ExitCode)
				}
				res := run(t, sb, "/bin/sh", "-c", "echo out; echo err >&2; id -u; echo $SANDCHECK_TASK $TARGET_VAR")
				wantUID := "0"
				if tc.cfg.User != "" {
					wantUID = "65534"
				}
				if got := string(res.Stdout); !strings.Contains(got, "out\n"+wantUID+"\n") {
					t.Errorf("stdout %q, want out then uid %s", got, wantUID)
				}
				if string(res.Stderr) != "err\n" {
					t.Errorf("stderr %q, want %q", res.Stderr, "err\n")
				}
				if tc.cfg.Env != nil && !strings.Contains(string(res.Stdout), "t1 target-value") {
					t.Errorf("environment not passed: stdout %q", res.Stdout)
				}
				if res := run(t, sb, "/bin/cat", "/etc/resolv.conf"); !strings.Contains(string(res.Stdout), "nameserver "+testDNS) {
					t.Errorf("resolv.conf %q does not name %s", res.Stdout, testDNS)
				}
				if res.Duration <= 0 {
					t.Errorf("duration %v", res.Duration)
				}

				view, err := sb.Inspect(context.Background())
				if err != nil {
					t.Fatalf("Inspect: %v", err)
				}
				checkView(t, view, tc.cfg)

				closeTwice(t, sb)
				left, err := sb.VerifyTeardown(context.Background())
				if err != nil {
					t.Fatalf("VerifyTeardown: %v", err)
				}
				if len(left) > 0 {
					t.Errorf("survived Close:\n%s", strings.Join(left, "\n"))
				}
			})
		}
	}
}

// checkView compares the engine's view with the configuration.
func checkView(t *testing.T, v runners.RuntimeView, cfg targets.Docker) {
	t.Helper()
	wantSeccomp := cfg.Seccomp
	if wantSeccomp == "" {
		wantSeccomp = "default"
	}
	if v.Runtime != cfg.Runtime || v.User != cfg.User || v.Privileged || v.Seccomp != wantSeccomp ||
		v.NoNewPrivileges != cfg.NoNewPrivileges || v.ReadOnlyRootfs != cfg.ReadOnlyRootfs ||
		v.NetworkMode != "none" || v.PidsLimit != cfg.PidsLimit {
		t.Errorf("view %+v does not match configuration %+v", v, cfg)
	}
	if !slices.Equal(v.CapAdd, cfg.CapAdd) || !slices.Equal(v.CapDrop, cfg.CapDrop) {
		t.Errorf("caps add %v drop %v, want %v %v", v.CapAdd, v.CapDrop, cfg.CapAdd, cfg.CapDrop)
	}
	if cfg.Memory == "128Mi" && v.MemoryBytes != 128<<20 {
		t.Errorf("memory %d, want %d", v.MemoryBytes, 128<<20)
	}
	if v.NanoCPUs != int64(cfg.CPUs*1e9) {
		t.Errorf("nano cpus %d, want %d", v.NanoCPUs, int64(cfg.CPUs*1e9))
	}
	if cfg.SystemPaths == "unconfined" && len(v.MaskedPaths) != 0 {
		t.Errorf("system paths unconfined but masked paths %v", v.MaskedPaths)
	}
	if cfg.SystemPaths != "unconfined" && !slices.Contains(v.MaskedPaths, "/proc/kcore") {
		t.Errorf("masked paths %v lack /proc/kcore", v.MaskedPaths)
	}
	if v.Image != testImage || !strings.HasPrefix(v.ImageDigest, "sha256:") {
		t.Errorf("image %q digest %q", v.Image, v.ImageDigest)
	}
	if !slices.Contains(v.Env, "SANDCHECK_TASK") {
		t.Errorf("env names %v lack SANDCHECK_TASK", v.Env)
	}
	for _, e := range v.Env {
		if strings.Contains(e, "=") || strings.Contains(e, "value") {
			t.Errorf("env %q carries a value", e)
		}
	}
	probe := runners.Mount{}
	for _, m := range v.Mounts {
		if m.Destination == runners.ProbeMount {
			probe = m
		}
	}
	if probe.Type != "bind" || !probe.ReadOnly {
		t.Errorf("probe mount %+v is not a read-only bind (mounts %+v)", probe, v.Mounts)
	}
	for _, tm := range cfg.Tmpfs {
		if !slices.ContainsFunc(v.Mounts, func(m runners.Mount) bool { return m.Type == "tmpfs" && m.Destination == tm.Path }) {
			t.Errorf("tmpfs %s missing from mounts %+v", tm.Path, v.Mounts)
		}
	}
}

// closeTwice closes concurrently and then once more; all must succeed.
func closeTwice(t *testing.T, sb runners.Sandbox) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 2 {
		wg.Go(func() { errs[i] = sb.Close(context.Background()) })
	}
	wg.Wait()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errs[2] = sb.Close(cancelled)
	if err := errors.Join(errs...); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestExecCapsOutput(t *testing.T) {
	requireEngine(t)
	spec, _ := testSpec(t, fakeProbe(t))
	sb := start(t, hardened("runc"), spec)
	n := runners.MaxOutput + 100_000
	res := run(t, sb, "/.sandcheck/sandcheck-probe", "flood", strconv.Itoa(n))
	if res.ExitCode != 0 || !res.Truncated || len(res.Stdout) != runners.MaxOutput || len(res.Stderr) != runners.MaxOutput {
		t.Errorf("flood of %d bytes: exit %d, truncated %v, kept %d/%d bytes, want %d each",
			n, res.ExitCode, res.Truncated, len(res.Stdout), len(res.Stderr), runners.MaxOutput)
	}
	small := run(t, sb, "/.sandcheck/sandcheck-probe", "flood", "1000")
	if small.Truncated || len(small.Stdout) != 1000 || len(small.Stderr) != 1000 {
		t.Errorf("flood of 1000 bytes: truncated %v, kept %d/%d bytes", small.Truncated, len(small.Stdout), len(small.Stderr))
	}
}

func TestExecHonoursContext(t *testing.T) {
	requireEngine(t)
	spec, _ := testSpec(t, fakeProbe(t))
	sb := start(t, hardened("runc"), spec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	res, err := sb.Exec(ctx, []string{"/bin/sh", "-c", "echo started; sleep 60"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec past its deadline: err %v, want DeadlineExceeded", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Exec returned after %v, long after its deadline", took)
	}
	if !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("partial output %q lost", res.Stdout)
	}
	// The exec outlives its context inside the box; Close, even on the
	// cancelled context, kills it with the container.
	if err := sb.Close(ctx); err != nil {
		t.Errorf("Close on a cancelled context: %v", err)
	}
	if left, err := sb.VerifyTeardown(context.Background()); err != nil || len(left) > 0 {
		t.Errorf("after Close: %v %v", left, err)
	}
}

func TestExecMissingCommand(t *testing.T) {
	requireEngine(t)
	spec, _ := testSpec(t, fakeProbe(t))
	sb := start(t, hardened("runc"), spec)
	res := run(t, sb, "/no/such/command")
	if res.ExitCode == 0 {
		t.Errorf("a missing command exited 0 (stdout %q, stderr %q)", res.Stdout, res.Stderr)
	}
	t.Logf("missing command: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
}

func TestCopyIn(t *testing.T) {
	requireEngine(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "payload.sh")
	if err := os.WriteFile(file, []byte("#!/bin/sh\necho copied\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("writable root", func(t *testing.T) {
		spec, _ := testSpec(t, fakeProbe(t))
		sb := start(t, weak("runc"), spec)
		if err := sb.CopyIn(context.Background(), file, "/payload.sh"); err != nil {
			t.Fatalf("CopyIn: %v", err)
		}
		if res := run(t, sb, "/payload.sh"); res.ExitCode != 0 || string(res.Stdout) != "copied\n" {
			t.Errorf("copied script: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if err := sb.CopyIn(context.Background(), dir, "/tmp/dir"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("CopyIn of a folder: %v, want a not-a-regular-file error", err)
		}
		if err := sb.CopyIn(context.Background(), file, "tmp/relative"); err == nil {
			t.Error("CopyIn to a relative path succeeded")
		}
	})
	t.Run("read-only root", func(t *testing.T) {
		spec, _ := testSpec(t, fakeProbe(t))
		sb := start(t, hardened("runc"), spec)
		err := sb.CopyIn(context.Background(), file, "/tmp/payload.sh")
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("CopyIn into a read-only root: %v, want a read-only error", err)
		}
	})
}

func TestStartMissingImage(t *testing.T) {
	requireEngine(t)
	spec, mark := testSpec(t, fakeProbe(t))
	r, err := New(hardened("runc"), "sandcheck-no-such-image:never")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.Start(context.Background(), spec)
	if err == nil {
		sb.Close(context.Background())
		t.Fatal("Start of a missing image succeeded")
	}
	if !errors.Is(err, runners.ErrStart) || !errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), "sandcheck-no-such-image:never") {
		t.Errorf("error %q, want ErrStart and ErrImageNotFound naming the image", err)
	}
	if left := leftovers(t, mark); len(left) > 0 {
		t.Errorf("containers left: %v", left)
	}
}

func TestStartFailures(t *testing.T) {
	requireEngine(t)
	notELF := t.TempDir()
	if err := os.Chmod(notELF, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notELF, runners.ProbeBinary), []byte("this is not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, runtime string
		probes        string
		env           map[string]string
		timeout       time.Duration
		want          []string // in the error
	}{
		{"entrypoint exits/runc", "runc", "", map[string]string{"FAKEPROBE_HOLD_EXIT": "3"}, 0,
			[]string{"stopped before it was ready", "exit code 3", "exiting at once as told"}},
		{"entrypoint exits/runsc", "runsc", "", map[string]string{"FAKEPROBE_HOLD_EXIT": "3"}, 0,
			[]string{"exit code 3"}},
		{"runtime cannot exec/runc", "runc", notELF, nil, 0, []string{"exec format error"}},
		{"runtime cannot exec/runsc", "runsc", notELF, nil, 0, []string{"exec format error"}},
		{"probe never answers", "runc", "", map[string]string{"FAKEPROBE_LIST_EXIT": "4"}, 3 * time.Second,
			[]string{"did not answer", "exit code 4", "list fails as told"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRuntime(t, tc.runtime)
			probes := tc.probes
			if probes == "" {
				probes = fakeProbe(t)
			}
			spec, mark := testSpec(t, probes)
			for k, v := range tc.env {
				spec.Env[k] = v
			}
			if tc.timeout > 0 {
				spec.StartTimeout = tc.timeout
			}
			r, err := New(hardened(tc.runtime), testImage)
			if err != nil {
				t.Fatal(err)
			}
			before := shims(t)
			sb, err := r.Start(context.Background(), spec)
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, runners.ErrStart) {
				t.Errorf("error %q does not wrap ErrStart", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			t.Logf("start error: %v", err)
			if left := leftovers(t, mark); len(left) > 0 {
				t.Errorf("containers left: %v", left)
			}
			if left := orphanShims(t, before); len(left) > 0 {
				t.Errorf("runtime processes left on the host after the failed start: %v", left)
			}
		})
	}
}

func TestTeardownChecksSeeARunningSandbox(t *testing.T) {
	requireEngine(t)
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			requireRuntime(t, runtime)
			spec, _ := testSpec(t, fakeProbe(t))
			sb := start(t, hardened(runtime), spec)
			if _, err := sb.VerifyTeardown(context.Background()); !errors.Is(err, errNotClosed) {
				t.Errorf("VerifyTeardown before Close: %v, want errNotClosed", err)
			}
			// The checks VerifyTeardown repeats after Close must see the
			// sandbox while it runs, or a clean result would prove nothing.
			found, err := sb.survivors(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{"container ", "process ", "cgroup ", "mount "} {
				if !slices.ContainsFunc(found, func(s string) bool { return strings.HasPrefix(s, kind) }) {
					t.Errorf("no %sfound for a running sandbox in:\n%s", kind, strings.Join(found, "\n"))
				}
			}
			if runtime == "runsc" && !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, "runsc") }) {
				t.Errorf("no runsc process found for a running gVisor sandbox in:\n%s", strings.Join(found, "\n"))
			}
			t.Logf("a running sandbox shows:\n%s", strings.Join(found, "\n"))
			if err := sb.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			left, err := sb.VerifyTeardown(context.Background())
			if err != nil || len(left) > 0 {
				t.Errorf("after Close: %v %v", left, err)
			}
		})
	}
}
