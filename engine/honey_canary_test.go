package engine

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// TestCanaryProcessVisibleAndStopped starts the canary process from a fresh
// probe binary, finds its token in /proc as a probe in the host's PID
// namespace would, and checks that stop leaves no process behind.
func TestCanaryProcessVisibleAndStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the probe binary; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "sandcheck-probe")
	build := exec.Command("go", "build", "-o", bin, "../cmd/sandcheck-probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe binary: %v\n%s", err, out)
	}
	c, err := startCanaryProc(bin)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.cmd.Process.Pid
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		c.stop(slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Fatalf("reading the canary's command line: %v", err)
	}
	arg0, _, _ := bytes.Cut(cmdline, []byte{0})
	if string(arg0) != probes.CanaryProcPrefix+c.token {
		t.Errorf("canary argv[0] %q, want the prefix and token %q", arg0, c.token)
	}
	if it, ok := c.check("proc-other-run," + c.token); !ok || it.Indicates != probes.Escaped {
		t.Errorf("the canary's own token, among another run's, was not confirmed: %+v", it)
	}
	if it, ok := c.check("proc-forged,proc-other"); !ok || it.Indicates != "" {
		t.Errorf("a forged token indicated %q, want nothing", it.Indicates)
	}
	c.stop(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		t.Errorf("the canary process %d is still there after stop (kill 0: %v)", pid, err)
	}
}

// TestBlockCanaryAttachedReadOnlyAndRemoved makes the loop device, checks it
// is read-only and that remove detaches it and deletes its file.
func TestBlockCanaryAttachedReadOnlyAndRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a loop device needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices on this kernel: %v", err)
	}
	dir := t.TempDir()
	b, err := newBlockCanary(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(b.path)
	ro, err := os.ReadFile("/sys/block/" + name + "/ro")
	if err != nil || strings.TrimSpace(string(ro)) != "1" {
		t.Errorf("%s read-only flag %q (%v), want 1", b.path, ro, err)
	}
	if it, ok := b.check([]string{"1:3", b.rdev}); !ok || it.Indicates != probes.Escaped {
		t.Errorf("the canary's own device numbers were not confirmed: %+v", it)
	}
	if it, _ := b.check([]string{"1:3"}); it.Indicates != "" {
		t.Errorf("other device numbers indicated %q, want nothing", it.Indicates)
	}
	b.remove(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if backing, err := os.ReadFile("/sys/block/" + name + "/loop/backing_file"); err == nil {
		t.Errorf("%s is still attached to %s after remove", b.path, strings.TrimSpace(string(backing)))
	}
	if _, err := os.Stat(b.image); !os.IsNotExist(err) {
		t.Errorf("the canary's file %s is still there: %v", b.image, err)
	}
}
