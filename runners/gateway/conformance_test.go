package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/runnertest"
	"github.com/sandcheck/sandcheck/targets"
)

// startServer builds and starts fixtures/gateway and returns its URL and
// admin key; it stops (deleting its instances) at cleanup.
func startServer(t *testing.T, flags ...string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and the docker CLI")
	}
	if err := exec.Command("docker", "image", "inspect", "sandcheck/runner:dev").Run(); err != nil {
		t.Skip("sandcheck/runner:dev is not built (make images)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "../../fixtures/gateway").CombinedOutput(); err != nil {
		t.Fatalf("building the gateway server: %v\n%s", err, out)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	admin := "adm-" + hex.EncodeToString(b[:])
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0", "--addr-file", addrFile}, flags...)...)
	cmd.Env = append(os.Environ(), "GATEWAY_ADMIN_KEY="+admin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	for range 100 {
		if a, err := os.ReadFile(addrFile); err == nil && len(a) > 0 {
			return "http://" + string(a), admin
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the gateway server did not start")
	return "", ""
}

func testConfig(url string) targets.Gateway {
	return targets.Gateway{URL: url, AdminKeyEnv: "GATEWAY_ADMIN_KEY", RuntimeProfile: "session",
		TaskResponse: &targets.TaskResponse{ExitCode: "exit_code", Stdout: "stdout", Stderr: "stderr"},
		Host:         &targets.GatewayHost{Box: "sandbox-${ID}", Egress: "sandbox-egress-${ID}", KeyEnv: "FORCEAI_SCOPED_KEY", KeyCheckPath: "/v1/models"}}
}

func TestConformance(t *testing.T) {
	url, admin := startServer(t)
	runnertest.Run(t, runnertest.Config{
		New: func(t *testing.T) runners.Runner {
			r := New(testConfig(url), admin, nil)
			if err := r.checkSubstrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return r
		},
	})
	// The server's own list (not in the document; see its README): every
	// instance the suite made is gone.
	var list struct {
		Instances []map[string]string `json:"instances"`
	}
	c := &client{base: url, http: &http.Client{}, timeout: 30 * time.Second}
	if _, err := c.call(t.Context(), http.MethodGet, "/v1/runtime/agents", admin, nil, &list, 0); err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) > 0 {
		t.Errorf("instances left on the platform: %v", list.Instances)
	}
}
