package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// SeePlant looks only before Close, only for well-formed tokens and known
// kinds, and sees a token file in a writable host folder (never what a
// link there points at).
func TestSeePlantRefusesAndSeesScratch(t *testing.T) {
	dir := t.TempDir()
	s := &Sandbox{id: "x", hostDirs: []string{dir}}
	ctx := context.Background()
	tok := "sc0123456789ab"
	for _, bad := range []string{"", "sc01", "../etc", "SC0123456789AB"} {
		if _, err := s.SeePlant(ctx, bad, []string{"scratch"}); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
	if _, err := s.SeePlant(ctx, tok, []string{"bogus"}); err == nil {
		t.Error("unknown kind accepted")
	}
	seen, err := s.SeePlant(ctx, tok, []string{"scratch"})
	if err != nil || len(seen["scratch"]) != 0 {
		t.Fatalf("nothing planted: seen %v, %v", seen, err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, probes.TeardownPrefix+tok)); err != nil {
		t.Fatal(err)
	}
	if seen, _ := s.SeePlant(ctx, tok, []string{"scratch"}); len(seen["scratch"]) != 0 {
		t.Errorf("a link the box left reads as its plant: %v", seen)
	}
	os.Remove(filepath.Join(dir, probes.TeardownPrefix+tok))
	if err := os.WriteFile(filepath.Join(dir, probes.TeardownPrefix+tok), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if seen, err := s.SeePlant(ctx, tok, []string{"scratch"}); err != nil || len(seen["scratch"]) != 1 {
		t.Errorf("the token file is not seen: %v, %v", seen, err)
	}
	s.closeRan = true
	if _, err := s.SeePlant(ctx, tok, []string{"scratch"}); err == nil {
		t.Error("SeePlant after Close accepted")
	}
}

// processesOutside sees a process carrying the token whose cgroup does not
// name the sandbox, and not one whose cgroup does.
func TestProcessesOutsideTheSandbox(t *testing.T) {
	tok := "sczz" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "SANDCHECK_TEST_TOKEN="+tok)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cgroup"))
	if err != nil || len(strings.TrimSpace(string(cg))) == 0 {
		t.Skipf("no cgroup file to read for the child: %v", err)
	}
	var got []string
	for range 50 { // the child's environment is readable once it has exec'd
		if got, err = processesOutside(tok, "nosuchcontainerid"); err != nil || len(got) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || len(got) != 1 || !strings.Contains(got[0], strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("processesOutside = %v, %v; want the child %d", got, err, cmd.Process.Pid)
	}
	// Its own cgroup path stands in for the sandbox's container ID.
	line := strings.TrimSpace(strings.Split(string(cg), "\n")[0])
	inside := line[strings.LastIndex(line, ":")+1:]
	if got, err := processesOutside(tok, inside); err != nil || len(got) != 0 {
		t.Errorf("a process in the sandbox's cgroup (%s) reads as outside it: %v, %v", inside, got, err)
	}
}
