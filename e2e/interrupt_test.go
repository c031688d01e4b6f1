package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedRunLeavesNothing interrupts a weak-reference run (SIGINT,
// as Ctrl-C does) once its harness network is up, and checks that the run
// still removes its sandboxes, network, bridge and firewall rules, keeps its
// evidence and exits 2 (the harness could not finish).
func TestInterruptedRunLeavesNothing(t *testing.T) {
	bin := binDir(t)
	out := t.TempDir()
	before := bridges()
	cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/weak.yaml", "--out-dir", out, "--quiet")
	cmd.Dir = ".."
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &se, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Wait (bounded; other runs on the machine may hold the harness lock
	// for minutes) for a new bridge, then interrupt.
	var ours []string
	for deadline := time.Now().Add(5 * time.Minute); len(ours) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the run never created its harness bridge\n%s", se.String())
		}
		ours = newOnes(before, bridges())
	}
	time.Sleep(2 * time.Second) // let sandboxes start too
	// The IPv6 fence is up while the run is (netharness/ipv6.go). Other
	// runs on the machine make bridges too: look at this run's own.
	if b := runBridge(t, out); b == "" {
		t.Error("found no bridge of this run's harness network")
	} else {
		ours = []string{b} // the bridges checked below: this run's only
		if r6, err := exec.Command("ip6tables", "-S").Output(); err != nil {
			t.Errorf("ip6tables -S: %v", err)
		} else if !strings.Contains(string(r6), b) {
			t.Errorf("no ip6tables rule names %s while the run is up:\n%s", b, r6)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the run did not end within 120s of SIGINT\n%s", se.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit %v after SIGINT, want 2\n%s", err, se.String())
	}
	if _, err := os.Stat(filepath.Join(out, "evidence.jsonl")); err != nil {
		t.Errorf("evidence.jsonl missing after SIGINT: %v", err)
	}
	for _, b := range ours {
		if _, err := os.Stat("/sys/class/net/" + b); err == nil {
			t.Errorf("bridge %s survived the interrupted run", b)
		}
		rules, err := exec.Command("iptables", "-S").Output()
		if err != nil {
			t.Errorf("iptables -S: %v", err)
		} else if strings.Contains(string(rules), b) {
			t.Errorf("firewall rules naming %s survived the interrupted run", b)
		}
		if r6, err := exec.Command("ip6tables", "-S").Output(); err != nil {
			t.Errorf("ip6tables -S: %v", err)
		} else if strings.Contains(string(r6), b) {
			t.Errorf("ip6tables rules naming %s survived the interrupted run", b)
		}
	}
	checkNoIPv6Leftovers(t)
	// This run's own sandboxes, by its run ID. A weak-reference container
	// of another run (an earlier test's) is named in the log: the sweep at
	// the start of every run removes those, and their own tests answer
	// for them.
	runID := runIDOf(out)
	if runID == "" {
		t.Fatal("evidence.jsonl names no run ID")
	}
	if o, err := exec.Command("docker", "ps", "-a", "--filter", "label=sandcheck.target=weak-reference", "--format", `{{.ID}} {{.Names}} {{.Status}} run={{.Label "sandcheck.run"}} task={{.Label "sandcheck.task"}}`).Output(); err == nil && len(bytes.TrimSpace(o)) > 0 {
		t.Logf("weak-reference containers after the interrupted run %s:\n%s", runID, o)
	}
	for _, q := range [][]string{
		{"ps", "-aq", "--filter", "label=sandcheck.run=" + runID},
		{"network", "ls", "-q", "--filter", "label=sandcheck.harness"},
	} {
		o, err := exec.Command("docker", q...).Output()
		if err != nil {
			t.Errorf("docker %v: %v", q, err)
		} else if s := strings.TrimSpace(string(o)); s != "" {
			t.Errorf("the interrupted run left behind (docker %s): %s", strings.Join(q, " "), s)
		}
	}
}

func bridges() []string {
	m, _ := filepath.Glob("/sys/class/net/scbr-*")
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func newOnes(before, now []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var out []string
	for _, b := range now {
		if !seen[b] {
			out = append(out, b)
		}
	}
	return out
}

// runBridge is the bridge of the harness network of the run writing its
// evidence to out: the run ID from its run-start event, then the Docker
// network labelled with it. It waits (bounded) for both.
func runBridge(t *testing.T, out string) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		runID := runIDOf(out)
		if runID == "" {
			continue
		}
		if b := bridgeOf(runID); b != "" {
			// The fence goes up right after the bridge: wait for it too.
			for until := time.Now().Add(20 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
				if r6, err := exec.Command("ip6tables", "-S").Output(); err == nil && strings.Contains(string(r6), b) {
					break
				}
			}
			return b
		}
	}
	return ""
}
