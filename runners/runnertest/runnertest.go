// Package runnertest is the runner conformance suite: one function, Run,
// that every runner's tests call with a factory for that runner, in the
// style of nomad's driver test harness. It starts real sandboxes and checks
// what the engine relies on: start, copy in, exec with bounded output,
// timeouts through ctx, closing twice, closing after the sandbox died, a
// failed start that wraps runners.ErrStart and leaves nothing, no leftovers
// on the host after Close, the runtime's host view where the runner offers
// one, and task launch (Command with Waiter).
//
// The sandboxes run a stand-in probe binary (./fakeprobe, built statically
// once per test binary), so the suite needs no shell inside the sandbox.
package runnertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// Config describes the runner under test.
type Config struct {
	// New returns the runner under test; it may skip the test (with a
	// reason) when the machine lacks what the runner needs.
	New func(t *testing.T) runners.Runner
	// BadSpec turns a good spec into one the runner must refuse to start
	// (nil: the suite uses a probe folder without a probe binary).
	BadSpec func(runners.SandboxSpec) runners.SandboxSpec
	// CopyPath is a file path inside the sandbox where CopyIn works and the
	// sandbox's user can read (default /tmp/conformance-copy).
	CopyPath string
	// NoCopyIn is the reason the runner cannot copy files in ("" when it
	// can); the copy-in check is then skipped with that reason.
	NoCopyIn string
	// HiddenProcesses is why the sandbox's processes are not host processes
	// carrying their environment (gVisor runs them inside its own kernel);
	// "" when they are, which the suite then checks.
	HiddenProcesses string
	// OwnEntrypoint is why the sandbox's first process is the platform's
	// own rather than the probe binary's holder (the platform starts the
	// box before the probe can be copied in); "" when it is the holder. The
	// holder-dies-at-once start failure is then skipped with that reason.
	OwnEntrypoint string
}

// Marker is the environment variable the suite sets in every sandbox to a
// fresh value, by which it finds the sandbox's processes on the host.
const Marker = "SANDCHECK_CONFORMANCE"

// Bounds of the suite's waits.
const (
	execTimeout  = 30 * time.Second
	startTimeout = 60 * time.Second
	goneGrace    = 10 * time.Second
)

// Run runs the conformance suite against the runner cfg.New returns. It
// needs root (it reads every process's environment to find leftovers).
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the conformance suite needs root (it reads every host process's environment)")
	}
	if cfg.CopyPath == "" {
		cfg.CopyPath = "/tmp/conformance-copy"
	}
	s := &suite{cfg: cfg, probe: probeDir(t)}
	t.Run("exec", s.testExec)
	t.Run("copy-in", s.testCopyIn)
	t.Run("bounded-output", s.testBoundedOutput)
	t.Run("exec-timeout", s.testExecTimeout)
	t.Run("close-twice", s.testCloseTwice)
	t.Run("close-after-death", s.testCloseAfterDeath)
	t.Run("start-failure", s.testStartFailure)
	t.Run("no-leftovers", s.testNoLeftovers)
	t.Run("inspect", s.testInspect)
	t.Run("task", s.testTask)
	t.Run("task-bounded-output", s.testTaskBoundedOutput)
}

type suite struct {
	cfg   Config
	probe string
}

// probePath is the stand-in probe inside a sandbox.
const probePath = runners.ProbeMount + "/" + runners.ProbeBinary

// spec is a fresh spec marked with a new marker value, which it returns.
func (s *suite) spec(t *testing.T) (runners.SandboxSpec, string) {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])
	// A probe folder of its own (the binary hard-linked), so that a check
	// for mounts naming it sees this sandbox's alone.
	dir := filepath.Join(s.probe, mark)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(s.probe, runners.ProbeBinary), filepath.Join(dir, runners.ProbeBinary)); err != nil {
		t.Fatal(err)
	}
	return runners.SandboxSpec{
		Name:         "conformance-" + mark[:8],
		Labels:       map[string]string{"sandcheck.conformance": mark},
		ProbeDir:     dir,
		DNS:          []string{"127.0.0.11"},
		Env:          map[string]string{Marker: mark},
		StartTimeout: startTimeout,
	}, mark
}

// start starts a sandbox, checks it leaves nothing once closed, and closes
// it at cleanup.
func (s *suite) start(t *testing.T, spec runners.SandboxSpec, mark string) runners.Sandbox {
	t.Helper()
	r := s.cfg.New(t)
	sb, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
		checkGone(t, sb, mark, spec.ProbeDir)
	})
	return sb
}

// run runs argv with a bound and fails the test on an error.
func run(t *testing.T, sb runners.Sandbox, argv ...string) runners.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	res, err := sb.Exec(ctx, argv)
	if err != nil {
		t.Fatalf("Exec %v: %v (stderr %q)", argv, err, res.Stderr)
	}
	return res
}

func (s *suite) testExec(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	if sb.ID() == "" {
		t.Error("ID is empty")
	}
	if res := run(t, sb, probePath, "exit", "7"); res.ExitCode != 7 {
		t.Errorf("exit 7 gave exit code %d", res.ExitCode)
	}
	res := run(t, sb, probePath, "echo2", "to-out", "to-err")
	if string(res.Stdout) != "to-out" || string(res.Stderr) != "to-err" || res.ExitCode != 0 {
		t.Errorf("echo2: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Duration <= 0 || res.Truncated {
		t.Errorf("echo2: duration %v truncated %v", res.Duration, res.Truncated)
	}
	if res := run(t, sb, probePath, "getenv", Marker); string(res.Stdout) != mark {
		t.Errorf("the spec's environment did not reach the exec: %s=%q, want %q", Marker, res.Stdout, mark)
	}
	// Execs run one after another and side by side.
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
			defer cancel()
			r, err := sb.Exec(ctx, []string{probePath, "exit", strconv.Itoa(i + 1)})
			codes[i] = r.ExitCode
			if err != nil {
				codes[i] = -100
			}
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != i+1 {
			t.Errorf("concurrent exec %d: exit code %d, want %d", i, c, i+1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	if _, err := sb.Exec(ctx, nil); err == nil {
		t.Error("Exec of an empty command did not fail")
	}
}

func (s *suite) testCopyIn(t *testing.T) {
	if s.cfg.NoCopyIn != "" {
		t.Skip(s.cfg.NoCopyIn)
	}
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	src := filepath.Join(t.TempDir(), "in")
	want := "copied " + mark
	if err := os.WriteFile(src, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.CopyIn(context.Background(), src, s.cfg.CopyPath); err != nil {
		t.Fatalf("CopyIn: %v", err)
	}
	if res := run(t, sb, probePath, "cat", s.cfg.CopyPath); string(res.Stdout) != want {
		t.Errorf("the copied file reads %q (exit %d, stderr %q), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	if err := sb.CopyIn(context.Background(), filepath.Join(t.TempDir(), "missing"), s.cfg.CopyPath); err == nil {
		t.Error("CopyIn of a missing host file did not fail")
	}
}

func (s *suite) testBoundedOutput(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	n := 4 * runners.MaxOutput
	start := time.Now()
	res := run(t, sb, probePath, "flood", strconv.Itoa(n))
	if len(res.Stdout) != runners.MaxOutput || len(res.Stderr) != runners.MaxOutput || !res.Truncated {
		t.Errorf("flood of %d bytes: kept %d stdout, %d stderr, truncated %v; want %d each and truncated",
			n, len(res.Stdout), len(res.Stderr), res.Truncated, runners.MaxOutput)
	}
	if res.ExitCode != 0 {
		t.Errorf("flood exit code %d: the writer was not drained", res.ExitCode)
	}
	if d := time.Since(start); d > execTimeout/2 {
		t.Errorf("flood took %v", d)
	}
	// Under the cap, nothing is cut.
	res = run(t, sb, probePath, "flood", strconv.Itoa(runners.MaxOutput))
	if len(res.Stdout) != runners.MaxOutput || res.Truncated {
		t.Errorf("output of exactly the cap: kept %d, truncated %v", len(res.Stdout), res.Truncated)
	}
}

func (s *suite) testExecTimeout(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := sb.Exec(ctx, []string{probePath, "sleep", "10m"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec past its deadline: error %v, want one wrapping context.DeadlineExceeded", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("Exec past its deadline: exit code %d, want -1", res.ExitCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Exec returned %v after its 1s deadline", d)
	}
	// The sandbox still works.
	if res := run(t, sb, probePath, "exit", "0"); res.ExitCode != 0 {
		t.Errorf("exec after a timed-out one: exit %d", res.ExitCode)
	}
}

func (s *suite) testCloseTwice(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
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
		t.Errorf("Close twice, concurrently, then with a cancelled context: %v", err)
	}
	checkGone(t, sb, mark, spec.ProbeDir)
}

func (s *suite) testCloseAfterDeath(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	m, ok := sb.(runners.CPUMeter)
	if !ok {
		t.Skip("the sandbox offers no host-side Kill (runners.CPUMeter)")
	}
	if err := m.Kill(context.Background()); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// The sandbox is dead: an exec fails or reports a failure, never hangs.
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	if res, err := sb.Exec(ctx, []string{probePath, "exit", "0"}); err == nil && res.ExitCode == 0 {
		t.Error("an exec into a killed sandbox succeeded")
	}
	if ctx.Err() != nil {
		t.Error("an exec into a killed sandbox hung until its deadline")
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("Close after the sandbox died: %v", err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("second Close after the sandbox died: %v", err)
	}
	checkGone(t, sb, mark, spec.ProbeDir)
}

func (s *suite) testStartFailure(t *testing.T) {
	cases := []struct {
		name string
		bad  func(runners.SandboxSpec) runners.SandboxSpec
	}{
		{"no probe binary", func(sp runners.SandboxSpec) runners.SandboxSpec {
			sp.ProbeDir = t.TempDir()
			return sp
		}},
		// The sandbox is made, then its first process dies at once: what
		// the runner made must go.
		{"holder dies at once", func(sp runners.SandboxSpec) runners.SandboxSpec {
			sp.Env["FAKEPROBE_HOLD_EXIT"] = "3"
			sp.StartTimeout = 20 * time.Second
			return sp
		}},
	}
	if s.cfg.BadSpec != nil {
		cases = append(cases, struct {
			name string
			bad  func(runners.SandboxSpec) runners.SandboxSpec
		}{"runner's bad spec", s.cfg.BadSpec})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "holder dies at once" && s.cfg.OwnEntrypoint != "" {
				t.Skip(s.cfg.OwnEntrypoint)
			}
			spec, mark := s.spec(t)
			spec = c.bad(spec)
			r := s.cfg.New(t)
			before := cgroupDirs()
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			defer cancel()
			sb, err := r.Start(ctx, spec)
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("Start of a bad spec succeeded")
			}
			if !errors.Is(err, runners.ErrStart) {
				t.Errorf("Start of a bad spec: %v, which does not wrap runners.ErrStart", err)
			}
			if sb != nil {
				t.Errorf("Start failed but returned a sandbox %v", sb)
			}
			checkGone(t, nil, mark, spec.ProbeDir)
			if left := newCgroupDirs(before); len(left) > 0 {
				t.Errorf("a failed start left cgroups:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

func (s *suite) testNoLeftovers(t *testing.T) {
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	// A detached child in its own session, and an exec still running: both
	// must go with the sandbox.
	res := run(t, sb, probePath, "spawn", "10m")
	if res.ExitCode != 0 {
		t.Fatalf("spawn: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sb.Exec(ctx, []string{probePath, "sleep", "10m"})
	}()
	time.Sleep(500 * time.Millisecond)
	if procs := markedProcesses(mark); len(procs) == 0 && s.cfg.HiddenProcesses == "" {
		t.Errorf("no host process carries %s=%s while the sandbox runs: the leftover check would see nothing", Marker, mark)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(execTimeout):
		t.Error("an exec running at Close did not return")
	}
	checkGone(t, sb, mark, spec.ProbeDir)
}

func (s *suite) testInspect(t *testing.T) {
	r := s.cfg.New(t)
	spec, mark := s.spec(t)
	sb := s.start(t, spec, mark)
	in, ok := sb.(runners.Inspector)
	if r.Capabilities().Inspect != ok {
		t.Fatalf("Capabilities().Inspect is %v but the sandbox implements Inspector: %v", r.Capabilities().Inspect, ok)
	}
	if !ok {
		t.Skipf("runner %s offers no host view of its sandboxes", r.Name())
	}
	v, err := in.Inspect(context.Background())
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if v.Runtime == "" {
		t.Errorf("view names no runtime: %+v", v)
	}
	var probe *runners.Mount
	for i, m := range v.Mounts {
		if m.Destination == runners.ProbeMount {
			probe = &v.Mounts[i]
		}
	}
	if probe == nil || !probe.ReadOnly {
		t.Errorf("the view shows no read-only probe mount at %s: %+v", runners.ProbeMount, v.Mounts)
	}
	for _, e := range v.Env {
		if strings.Contains(e, mark) {
			t.Errorf("the view carries an environment value: %q", e)
		}
	}
}

func (s *suite) testTask(t *testing.T) {
	spec, mark := s.spec(t)
	spec.Command = []string{probePath, "echo2", "task-out", "task-err"}
	sb := s.start(t, spec, mark)
	w, ok := sb.(runners.Waiter)
	if !ok {
		t.Skip("the sandbox implements no Waiter: the runner offers no task launch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	res, err := w.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "task-out" || string(res.Stderr) != "task-err" {
		t.Errorf("task: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}

	spec, mark = s.spec(t)
	spec.Command = []string{probePath, "exit", "5"}
	sb = s.start(t, spec, mark)
	res, err = sb.(runners.Waiter).Wait(ctx)
	if err != nil || res.ExitCode != 5 {
		t.Errorf("task exit 5: code %d, error %v", res.ExitCode, err)
	}

	// A task that outlives Wait's deadline: Wait returns, Close ends it.
	spec, mark = s.spec(t)
	spec.Command = []string{probePath, "sleep", "10m"}
	sb = s.start(t, spec, mark)
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	start := time.Now()
	if _, err := sb.(runners.Waiter).Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its deadline: %v, want one wrapping context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Wait returned %v after its 1s deadline", d)
	}
}

func (s *suite) testTaskBoundedOutput(t *testing.T) {
	spec, mark := s.spec(t)
	spec.Command = []string{probePath, "flood", strconv.Itoa(3 * runners.MaxOutput)}
	sb := s.start(t, spec, mark)
	w, ok := sb.(runners.Waiter)
	if !ok {
		t.Skip("the sandbox implements no Waiter: the runner offers no task launch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	res, err := w.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// The cap and the cut hold; which bytes are kept is not checked here:
	// a runtime may keep a task's output in a bounded log of its own that
	// drops the oldest part before Wait reads it (Docker's json-file log).
	if len(res.Stdout) > runners.MaxOutput || len(res.Stderr) > runners.MaxOutput || !res.Truncated || res.ExitCode != 0 {
		t.Errorf("task flood: kept %d/%d, truncated %v, exit %d", len(res.Stdout), len(res.Stderr), res.Truncated, res.ExitCode)
	}
	if len(res.Stdout) < runners.MaxOutput || len(res.Stderr) < runners.MaxOutput {
		t.Logf("task flood: kept only %d bytes of stdout and %d of stderr of %d each (the runtime's log dropped some)", len(res.Stdout), len(res.Stderr), 3*runners.MaxOutput)
	}
}
