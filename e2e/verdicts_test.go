package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKilledRunIsSwept SIGKILLs a weak-reference run about 5 s after its
// first sandbox is up (nothing of the run's own cleanup runs), lists what it
// left (sandboxes, harness network and bridge, iptables and ip6tables rules,
// the run folder with its honey credentials), then runs `sandcheck cleanup`
// and checks none of it is left. Before the sweep, the sandbox kept running
// for up to 2 h and a following run removed at most the network parts.
func TestKilledRunIsSwept(t *testing.T) {
	bin := binDir(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/weak.yaml", "--out-dir", out, "--quiet")
	cmd.Dir = ".."
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &se, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// Bounded: other runs on the machine may hold the harness lock.
	var runID string
	var ctrs []string
	for deadline := time.Now().Add(5 * time.Minute); len(ctrs) == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run started no sandbox\n%s", se.String())
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before it was killed: %v\n%s", err, se.String())
		default:
		}
		if runID == "" {
			runID = runIDOf(out)
			continue
		}
		ctrs = dockerIDs(t, "ps", "-q", "--filter", "label=sandcheck.run="+runID)
	}
	time.Sleep(5 * time.Second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done

	// What the killed run left.
	ctrs = dockerIDs(t, "ps", "-aq", "--filter", "label=sandcheck.run="+runID)
	nets := dockerIDs(t, "network", "ls", "-q", "--filter", "label=sandcheck.run="+runID)
	var bridge string
	if len(nets) == 1 {
		b, _ := exec.Command("docker", "network", "inspect", "-f", `{{index .Options "com.docker.network.bridge.name"}}`, nets[0]).Output()
		bridge = strings.TrimSpace(string(b))
	}
	runDir := runDirOf(t, ctrs)
	t.Logf("run %s left %d sandboxes, networks %v, bridge %q, run folder %q", runID, len(ctrs), nets, bridge, runDir)
	if len(ctrs) == 0 || runDir == "" {
		t.Fatalf("the killed run left no sandbox or run folder to sweep: the test proves nothing")
	}

	// A run folder without an owner file is judged only once it has not
	// changed for 15 s (a run that is starting may not hold it yet).
	time.Sleep(16 * time.Second)
	c := exec.Command(filepath.Join(bin, "sandcheck"), "cleanup", "--lock-wait", "5m")
	c.Dir = ".."
	cout, err := c.CombinedOutput()
	t.Logf("sandcheck cleanup: %v\n%s", err, cout)
	if err != nil {
		t.Errorf("cleanup failed: %v", err)
	}

	if left := dockerIDs(t, "ps", "-aq", "--filter", "label=sandcheck.run="+runID); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
	if left := dockerIDs(t, "network", "ls", "-q", "--filter", "label=sandcheck.run="+runID); len(left) > 0 {
		t.Errorf("networks left: %v", left)
	}
	if bridge != "" {
		if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
			t.Errorf("bridge %s left", bridge)
		}
		for _, tool := range []string{"iptables", "ip6tables"} {
			rules, err := exec.Command(tool, "-S").Output()
			if err != nil {
				t.Errorf("%s -S: %v", tool, err)
			} else if strings.Contains(string(rules), bridge) {
				t.Errorf("%s rules naming %s left", tool, bridge)
			}
		}
	}
	if _, err := os.Stat(runDir); err == nil {
		t.Errorf("run folder %s (honey credentials) left", runDir)
	}
	for _, id := range ctrs {
		if shims := shimsOf(id); len(shims) > 0 {
			t.Errorf("runtime processes of %.12s left: %v", id, shims)
		}
	}
}

// runIDOf reads the run ID from the run-start event of evidence.jsonl.
func runIDOf(out string) string {
	b, err := os.ReadFile(filepath.Join(out, "evidence.jsonl"))
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var ev struct {
		Type string `json:"type"`
		Data struct {
			RunID string `json:"run_id"`
		} `json:"data"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Type != "run-start" {
		return ""
	}
	return ev.Data.RunID
}

func dockerIDs(t *testing.T, args ...string) []string {
	t.Helper()
	b, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return strings.Fields(string(b))
}

// runDirOf finds the run folder: the host side of a sandbox's probe mount.
func runDirOf(t *testing.T, ctrs []string) string {
	t.Helper()
	for _, id := range ctrs {
		b, err := exec.Command("docker", "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/.sandcheck"}}{{.Source}}{{end}}{{end}}`, id).Output()
		if err == nil && strings.TrimSpace(string(b)) != "" {
			return filepath.Dir(strings.TrimSpace(string(b)))
		}
	}
	return ""
}

// shimsOf lists containerd shims and runsc processes naming a container.
func shimsOf(id string) []string {
	var out []string
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(id)) {
			continue
		}
		argv0 := filepath.Base(string(bytes.SplitN(b, []byte{0}, 2)[0]))
		if strings.HasPrefix(argv0, "containerd-shim") || strings.HasPrefix(argv0, "runsc") {
			out = append(out, f)
		}
	}
	return out
}

// TestLyingProbeCannotConfirmBlockedSyscalls: the hardened reference with a
// seccomp profile that allows io_uring (as Docker 20.10's default did), run
// with a probe binary that reports every syscall probe blocked without making
// the call. Before kernelview required the tracer to see the call refused,
// "the kernel saw no io_uring_setup call" confirmed it: exit 0, every
// criterion passing. Now the criterion is unconfirmed and the run fails.
func TestLyingProbeCannotConfirmBlockedSyscalls(t *testing.T) {
	target := ioUringTarget(t)
	liar := forgeBinary(t, "blocked")
	r := sandcheck(t, "run", "--target", target, "--quiet", "--probe-binary", liar, "--probes", "syscalls.io-uring-setup")
	rec := r.mustRecord(t)
	if rec.Tracer == nil || rec.Tracer.Status != "on" {
		t.Fatalf("the tracer is not on (%+v): the test needs the kernel's view", rec.Tracer)
	}
	if r.code != 1 || rec.Verdict == nil || rec.Verdict.Pass {
		t.Fatalf("a lying probe gave exit %d, verdict %+v; want a failing verdict", r.code, rec.Verdict)
	}
	var reasons string
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "hardened-runtime" {
			reasons = strings.Join(c.Reasons, "\n")
			if c.Status != "unconfirmed" && c.Status != "fail" {
				t.Errorf("hardened-runtime is %s", c.Status)
			}
		}
	}
	if !strings.Contains(reasons, "never saw the call refused") || !strings.Contains(reasons, "syscalls.io-uring-setup") {
		t.Errorf("the verdict does not say the kernel never saw the call refused:\n%s", reasons)
	}
}

// ioUringTarget writes the hardened reference with a seccomp profile that
// lets io_uring through (as Docker 20.10's built-in default did), launched
// as exec, and returns its path: the honest probe fails it on
// syscalls.io-uring-setup.
func ioUringTarget(t *testing.T) string {
	t.Helper()
	binDir(t)
	dir, err := filepath.Abs("../fixtures/targets")
	if err != nil {
		t.Fatal(err)
	}
	var profile map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "seccomp-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &profile); err != nil {
		t.Fatal(err)
	}
	rules := profile["syscalls"].([]any)
	rules = append(rules, map[string]any{"names": []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, "action": "SCMP_ACT_ALLOW"})
	profile["syscalls"] = rules
	tmp := t.TempDir()
	pb, _ := json.Marshal(profile)
	if err := os.WriteFile(filepath.Join(tmp, "seccomp-io-uring.json"), pb, 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(filepath.Join(dir, "hardened.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(tb), "launch: task", "launch: exec", 1)
	src = strings.Replace(src, "seccomp: seccomp-default.json", "seccomp: seccomp-io-uring.json", 1)
	target := filepath.Join(tmp, "hardened-io-uring.yaml")
	if err := os.WriteFile(target, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return target
}
