package opensandbox

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/targets"
)

// The real upstream daemons (checked against SHA256SUMS by the server).
var (
	execdBin  = filepath.Join(fixture.DaemonDir(), "execd")
	egressBin = filepath.Join(fixture.DaemonDir(), "egress")
)

const testImage = "sandcheck/runner:dev"

// startServer runs the fixture lifecycle server on a loopback port for the
// test; at cleanup it fails the test for any sandbox still alive, then
// removes everything.
func startServer(t *testing.T, cfg fixture.Config) (*fixture.Server, string) {
	t.Helper()
	if err := exec.Command("docker", "image", "inspect", testImage).Run(); err != nil {
		t.Skipf("needs Docker and the image %s (make images): %v", testImage, err)
	}
	if _, err := os.Stat(execdBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI lays shared/ beside the checkout, but the upstream execd is not at %s: %v", execdBin, err)
		}
		t.Skipf("needs the upstream execd at %s (or set SANDCHECK_OPENSANDBOX_DIR): %v", execdBin, err)
	}
	if cfg.Execd == "" {
		cfg.Execd = execdBin
	}
	srv, err := fixture.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("starting the fixture server: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		// Deletes are asynchronous on the server: give them a moment.
		deadline := time.Now().Add(30 * time.Second)
		for len(srv.Live()) > 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if live := srv.Live(); len(live) > 0 {
			t.Errorf("sandboxes left on the server after the test: %v", live)
		}
		if left, err := srv.Containers(context.Background()); err != nil || len(left) > 0 {
			t.Errorf("containers left by the server's sandboxes: %v %v", left, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("closing the fixture server: %v", err)
		}
	})
	return srv, hs.URL + "/v1"
}

// testCfg is a target's opensandbox section for a server at url, polling
// fast.
func testCfg(url string) targets.OpenSandbox {
	return targets.OpenSandbox{URL: url, PollInterval: "200ms", RequestTimeout: "5s",
		Resources: &targets.OpenSandboxResources{CPU: "1", Memory: "256Mi"}}
}

func copyExec(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
