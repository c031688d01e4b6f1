package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// failingEngine is a Docker API proxy on a unix socket of the test's own
// that passes everything to the real engine, except that after the first
// `allow` container creations it refuses every other one, as an engine
// that stopped mid-run would.
func failingEngine(t *testing.T, allow int32) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	rp.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", "/var/run/docker.sock")
	}}
	rp.FlushInterval = -1
	var creates atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/containers/create") && creates.Add(1) > allow {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"the engine stopped (sandcheck test)"}`))
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// TestEngineFailureIsOneLine: the engine stops creating containers after
// the run's first sandbox. Every later probe fails the same way; before,
// the run printed one "sandcheck: harness:" line per probe (144 on the
// whole catalog); now the cause is printed once, with how many probes it
// cost, and the run exits 2.
func TestEngineFailureIsOneLine(t *testing.T) {
	bin := binDir(t)
	cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/hardened.yaml",
		"--probes", "resources.*", "--out-dir", t.TempDir(), "--quiet")
	cmd.Dir = ".."
	cmd.Env = append(cmd.Environ(), "DOCKER_HOST="+failingEngine(t, 1))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the run did not end within 10 minutes")
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit %v, want 2 (the harness's failure)", err)
	}
	var harness []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "sandcheck: harness:") && strings.Contains(l, "the engine stopped") {
			harness = append(harness, l)
		}
	}
	if len(harness) != 1 {
		t.Fatalf("%d lines for the engine's one failure, want 1", len(harness))
	}
	if !strings.Contains(harness[0], " probes: ") {
		t.Errorf("the line does not say how many probes the failure cost: %s", harness[0])
	}
	// Nor does the verdict repeat it per probe.
	if n := strings.Count(stdout.String(), "the engine stopped"); n > 0 {
		t.Errorf("the verdict repeats the engine's failure %d times", n)
	}
}
