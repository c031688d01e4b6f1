package bwrap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// fakeProbeDir builds the conformance suite's stand-in probe into a folder
// nobody can read.
func fakeProbeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandcheck-bwrap-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, runners.ProbeBinary), "github.com/sandcheck/sandcheck/runners/runnertest/fakeprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in probe: %v\n%s", err, out)
	}
	return dir
}

func startSandbox(t *testing.T, cfg Config, dir string, spec runners.SandboxSpec) *Sandbox {
	t.Helper()
	r, err := New(cfg, dir)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sb, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb.(*Sandbox)
}

func sh(t *testing.T, sb *Sandbox, script string) runners.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatalf("Exec %q: %v", script, err)
	}
	return res
}

// TestHardenedSettingsHold checks, from inside and from the host, that the
// hardened reference's settings are in force, both for an exec and for a
// task, and that the weak reference's are not.
func TestHardenedSettingsHold(t *testing.T) {
	requireBwrap(t)
	probe := fakeProbeDir(t)
	hardened, dir := loadTarget(t, "bwrap-hardened.yaml")
	spec := runners.SandboxSpec{Name: "settings", ProbeDir: probe, Hostname: "box-1", DNS: []string{"127.0.0.11"}, Env: map[string]string{"SANDCHECK_TASK": "t1"}}
	sb := startSandbox(t, hardened, dir, spec)

	// From inside, an exec.
	res := sh(t, sb, `grep -E '^(Seccomp|CapEff|CapBnd|NoNewPrivs):' /proc/self/status; id -u; id -g; hostname; cat /etc/resolv.conf; echo $SANDCHECK_TASK`)
	out := string(res.Stdout)
	for _, want := range []string{"Seccomp:\t2", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "\n65534\n65534\n", "box-1\n", "nameserver 127.0.0.11", "t1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("hardened exec: output lacks %q:\n%s%s", want, out, res.Stderr)
		}
	}
	// The seccomp filter refuses what Docker's default refuses without
	// CAP_SYS_ADMIN (a new user namespace) and the probe folder is
	// read-only.
	if res := sh(t, sb, "unshare --user true"); res.ExitCode == 0 {
		t.Error("hardened exec: unshare --user succeeded under the default seccomp profile")
	}
	// ...and allows what it allows behind argument checks: a netlink
	// socket (socket's 30th rule) and clone of a thread.
	if res := sh(t, sb, "ip link show lo && (sleep 0 & wait)"); res.ExitCode != 0 {
		t.Errorf("hardened exec: ip link show lo failed under the default seccomp profile: %s%s", res.Stdout, res.Stderr)
	}
	if res := sh(t, sb, "cat /proc/keys | wc -c; ulimit -n; df -k /dev/shm | tail -1"); !strings.HasPrefix(string(res.Stdout), "0\n1024\n") || !strings.Contains(string(res.Stdout), "8192") {
		t.Errorf("hardened exec: /proc/keys not masked, nofile not 1024 or /dev/shm not 8 MiB: %q %q", res.Stdout, res.Stderr)
	}
	if res := sh(t, sb, "touch /.sandcheck/x"); res.ExitCode == 0 {
		t.Error("hardened exec: the probe folder is writable")
	}
	if res := sh(t, sb, "ip link 2>/dev/null | grep -c ': eth' || true"); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("hardened exec: network none but links %q", res.Stdout)
	}
	// Inodes are capped (nr_inodes 4096 in the reference).
	if res := sh(t, sb, "df -i /scratch | tail -1"); !strings.Contains(string(res.Stdout), " 4096 ") {
		t.Errorf("hardened exec: /scratch inodes %q", res.Stdout)
	}
	// tmpfs scratch is shared between execs and sized.
	sh(t, sb, "echo kept > /scratch/f")
	if res := sh(t, sb, "cat /scratch/f; df -k /scratch | tail -1"); !strings.Contains(string(res.Stdout), "kept") || !strings.Contains(string(res.Stdout), "32768") {
		t.Errorf("hardened exec: scratch %q", res.Stdout)
	}
	// The pids limit holds: 64 tasks at most. The shell counts the
	// sleepers it started until a fork fails.
	res = sh(t, sb, `i=0; while [ $i -lt 100 ]; do sleep 3 || exit 0 & i=$((i+1)); echo $i; done`)
	lines := strings.Fields(string(res.Stdout))
	if len(lines) == 0 || len(lines) >= 100 {
		t.Errorf("hardened exec: %d background processes started under pids_limit 64 (stderr %q)", len(lines), res.Stderr)
	}
	t.Logf("pids limit: %d sleepers started, then %q", len(lines), strings.TrimSpace(string(res.Stderr)))
	time.Sleep(3 * time.Second)

	// From the host.
	v, err := sb.Inspect(context.Background())
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if v.Seccomp != "custom" || !v.NoNewPrivileges || v.Privileged || v.PidsLimit != 64 || v.MemoryBytes != 128<<20 || v.NanoCPUs != 1e9 {
		t.Errorf("hardened view %+v", v)
	}
	if !slices.Contains(v.MaskedPaths, "/proc/keys") || !slices.Contains(v.MaskedPaths, "/proc/kcore") {
		t.Errorf("hardened view: masked paths %v", v.MaskedPaths)
	}
	if !slices.ContainsFunc(v.Mounts, func(m runners.Mount) bool { return m.Type == "tmpfs" && m.Destination == "/scratch" }) {
		t.Errorf("hardened view lacks the /scratch tmpfs: %+v", v.Mounts)
	}

	// A task gets the same settings.
	tspec := spec
	tspec.Command = []string{"/bin/sh", "-c", `grep -E '^(Seccomp|CapEff|NoNewPrivs):' /proc/self/status; id -u`}
	task := startSandbox(t, hardened, dir, tspec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tres, err := task.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	for _, want := range []string{"Seccomp:\t2", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "65534"} {
		if !strings.Contains(string(tres.Stdout), want) {
			t.Errorf("hardened task: output lacks %q: %s%s", want, tres.Stdout, tres.Stderr)
		}
	}

	// The weak reference: the host's root with every capability, no filter.
	weak, _ := loadTarget(t, "bwrap-weak.yaml")
	weak.Network, weak.Unshare, weak.Binds = "none", []string{"net"}, nil
	wsb := startSandbox(t, weak, dir, spec)
	res = sh(t, wsb, `grep -E '^(Seccomp|CapEff):' /proc/self/status; id -u`)
	if !strings.Contains(string(res.Stdout), "Seccomp:\t0") || strings.Contains(string(res.Stdout), "CapEff:\t0000000000000000") || !strings.Contains(string(res.Stdout), "\n0\n") {
		t.Errorf("weak exec: %s%s", res.Stdout, res.Stderr)
	}
	if wv, err := wsb.Inspect(context.Background()); err != nil || !wv.Privileged || wv.Seccomp != "unconfined" {
		t.Errorf("weak view %+v (%v)", wv, err)
	}
}

func TestSeccompProfileCompiles(t *testing.T) {
	raw, err := CompileProfile("../../fixtures/targets/seccomp-default.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw)%8 != 0 || len(raw) < 8*300 {
		t.Errorf("program of %d bytes", len(raw))
	}
	withAdmin, err := CompileProfile("../../fixtures/targets/seccomp-default.json", []string{"CAP_SYS_ADMIN"})
	if err != nil {
		t.Fatal(err)
	}
	if len(withAdmin) <= len(raw) {
		t.Errorf("CAP_SYS_ADMIN's rules did not enlarge the program: %d vs %d bytes", len(withAdmin), len(raw))
	}
	if _, err := CompileProfile("../../fixtures/targets/missing.json", nil); err == nil {
		t.Error("a missing profile compiled")
	}
}
