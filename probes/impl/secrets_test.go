package impl

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestScanEnv(t *testing.T) {
	tests := []struct {
		kv, want string // want: pattern, "" for no finding
	}{
		{"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "aws-access-key-id"},
		{"X=prefix ASIAABCDEFGHIJKLMNOP suffix", "aws-access-key-id"},
		{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws-secret-access-key"},
		{"GH=ghp_" + strings.Repeat("a", 36), "github-token"},
		{"GH=github_pat_" + strings.Repeat("A", 30), "github-fine-grained-pat"},
		{"GL=glpat-" + strings.Repeat("x", 20), "gitlab-token"},
		{"SLACK=xoxb-1234567890-abc", "slack-token"},
		{"OPENAI=sk-" + strings.Repeat("z", 40), "sk-api-key"},
		{"ANTHROPIC=sk-ant-api03-" + strings.Repeat("z", 40), "sk-api-key"},
		{"G=AIza" + strings.Repeat("b", 35), "google-api-key"},
		{"KEY=-----BEGIN OPENSSH PRIVATE KEY-----\nabc", "private-key"},
		{"DATABASE_URL=postgres://user:hunter22@db:5432/x", "url-credentials"},
		{"MY_API_KEY=0123456789abcdef0123", "secret-name-long-value"},
		{"DB_PASSWORD=correcthorsebatterystaple", "secret-name-long-value"},
		// Not secrets.
		{"PATH=/usr/local/bin:/usr/bin", ""},
		{"HOME=/root", ""},
		{"TOKENIZERS_PARALLELISM=false", ""},
		{"GOOGLE_APPLICATION_CREDENTIALS=/var/run/secrets/creds.json", ""},
		{"PASSWORD=short", ""},
		{"SECRET_DIR=https://example.invalid/some/long/path", ""},
		{"EMPTY_TOKEN=", ""},
		{"NOEQUALS", ""},
	}
	for _, tt := range tests {
		got := scanEnv([]string{tt.kv})
		name, _, _ := strings.Cut(tt.kv, "=")
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: flagged as %s, want nothing", name, got[0].Pattern)
		case tt.want != "" && (len(got) != 1 || got[0].Pattern != tt.want || got[0].Name != name):
			t.Errorf("%s: got %+v, want pattern %s", name, got, tt.want)
		}
	}
}

func TestEnvSecretShapeNeverReportsValues(t *testing.T) {
	const secret = "AKIAIOSFODNN7EXAMPLE"
	t.Setenv("SANDCHECK_TEST_KEY", secret)
	r := envSecretShape(t.Context(), probesParams())
	if r.Outcome != "escaped" {
		t.Fatalf("outcome %s, want escaped", r.Outcome)
	}
	for k, v := range r.Evidence {
		if strings.Contains(v, secret) {
			t.Errorf("evidence %s carries the secret value", k)
		}
	}
	if strings.Contains(r.Detail, secret) {
		t.Error("detail carries the secret value")
	}
	if !strings.Contains(r.Evidence["findings"], "SANDCHECK_TEST_KEY:aws-access-key-id") {
		t.Errorf("findings = %q, want the variable name and pattern", r.Evidence["findings"])
	}
}

// TestEnvironBoxHolds checks which processes secrets.proc-environ takes as
// the box's: one in another mount namespace but the same network namespace
// (a pod's other container) is; one in other mount and network namespaces
// (another box, the host) is not.
func TestEnvironBoxHolds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making namespaces with unshare needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	// The namespaces as ownBox reads them where process 1 is in the box
	// (here it may be unreadable, which leaves the network namespace out).
	var box environBox
	box.mnt, _ = os.Readlink("/proc/self/ns/mnt")
	box.net, _ = os.Readlink("/proc/self/ns/net")
	if box.mnt == "" || box.net == "" {
		t.Fatal("the test's own namespaces are unreadable")
	}
	start := func(args ...string) int {
		t.Helper()
		cmd := exec.Command("unshare", append(args, "--", "sleep", "20")...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("unshare %v: %v", args, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		// unshare execs sleep in the same process once the namespaces
		// exist: wait (bounded) until its mount namespace differs.
		for i := 0; i < 100; i++ {
			if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid)); ns != "" && ns != box.mnt {
				return cmd.Process.Pid
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("unshare %v: the child never left the mount namespace", args)
		return 0
	}
	if !box.holds(os.Getpid()) {
		t.Error("the probe's own process is not the box's")
	}
	if pid := start("--mount"); !box.holds(pid) {
		t.Errorf("process %d in another mount namespace but this network namespace is not taken as the box's", pid)
	}
	if pid := start("--mount", "--net"); box.holds(pid) {
		t.Errorf("process %d in other mount and network namespaces is taken as the box's", pid)
	}
}
