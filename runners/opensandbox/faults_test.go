package opensandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
)

// TestFaults: a server that answers 500, malformed JSON or nothing, a
// sandbox that never becomes Running and a refused key each make Start fail
// with runners.ErrStart and an error naming the call, never carrying the
// key, and leave no sandbox on the server (startServer's cleanup lists
// them).
func TestFaults(t *testing.T) {
	const key = "the-right-key-4f1d"
	cases := []struct {
		name   string
		cfg    fixture.Config
		key    string
		wantIn string
	}{
		{"create-500", fixture.Config{Faults: map[string]string{"create": "500"}}, "", "POST /sandboxes: status 500"},
		{"create-malformed", fixture.Config{Faults: map[string]string{"create": "malformed"}}, "", "POST /sandboxes: malformed JSON"},
		{"create-timeout", fixture.Config{Faults: map[string]string{"create": "hang"}}, "", "POST /sandboxes: no answer within"},
		{"get-500", fixture.Config{Faults: map[string]string{"get": "500"}}, "", "GET /sandboxes/"},
		{"get-malformed", fixture.Config{Faults: map[string]string{"get": "malformed"}}, "", "malformed JSON"},
		{"endpoint-500", fixture.Config{Faults: map[string]string{"endpoint": "500"}}, "", "/endpoints/44772: status 500"},
		{"never-running", fixture.Config{NeverRunning: true}, "", "still Pending after"},
		// Running, but execd never answers within the start's bound.
		{"execd-late", fixture.Config{ExecdDelay: time.Minute}, "", "execd GET /ping: no answer within"},
		{"key-refused", fixture.Config{APIKey: key}, "a-wrong-key-9c2e", "refused the API key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, url := startServer(t, c.cfg)
			cfg := testCfg(url)
			cfg.RequestTimeout = "2s"
			r, err := New(cfg, testImage, c.key, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "fault-" + c.name,
				ProbeDir: t.TempDir(), StartTimeout: 8 * time.Second})
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("Start succeeded against a faulty server")
			}
			if !errors.Is(err, runners.ErrStart) || !strings.Contains(err.Error(), c.wantIn) {
				t.Errorf("error %q: want runners.ErrStart and %q", err, c.wantIn)
			}
			if strings.Contains(err.Error(), key) || (c.key != "" && strings.Contains(err.Error(), c.key)) {
				t.Errorf("the error carries the API key: %q", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("Start took %v to fail", d)
			}
		})
	}
}

// TestExitCodesAndUpload: exit codes come from CommandExecError through
// the real execd, output survives the stream, and the probe binary is
// uploaded executable with the target's resource limits and metadata
// applied by the server.
func TestExitCodesAndUpload(t *testing.T) {
	_, url := startServer(t, fixture.Config{})
	r, err := New(testCfg(url), testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := probeDir(t)
	sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "exit-codes", ProbeDir: dir,
		Env: map[string]string{"SANDCHECK_X": "y"}, StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		argv []string
		code int
		out  string
	}{
		{[]string{"sh", "-c", "exit 3"}, 3, ""},
		{[]string{"sh", "-c", "echo 'it''s'; echo two"}, 0, "its\ntwo"},
		{[]string{"sh", "-c", "test -x " + runners.ProbeMount + "/" + runners.ProbeBinary + " && echo $SANDCHECK_X"}, 0, "y"},
		{[]string{"sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"}, 0, "268435456"},
		{[]string{"/no/such/binary"}, 127, ""},
	} {
		res, err := sb.Exec(ctx, c.argv)
		if err != nil || res.ExitCode != c.code || (c.out != "" && string(res.Stdout) != c.out) {
			t.Errorf("%v: exit %d stdout %q stderr %q err %v; want exit %d stdout %q", c.argv, res.ExitCode, res.Stdout, res.Stderr, err, c.code, c.out)
		}
	}
}

// probeDir is a folder holding a stand-in probe binary (any executable).
func probeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := copyExec("/bin/true", dir+"/"+runners.ProbeBinary); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHealthAtRoot: upstream serves GET /health at its root only, not under
// the /v1 base the target names (server main.py 151-158, 189); the runner
// asks there, and Open against the stand-in (which 404s /v1/health) works.
func TestHealthAtRoot(t *testing.T) {
	for base, want := range map[string]string{
		"http://h:8080/v1":          "http://h:8080/health",
		"http://h:8080/v1/":         "http://h:8080/health",
		"https://gw/opensandbox/v1": "https://gw/opensandbox/health",
		"http://h:8080":             "http://h:8080/health",
	} {
		if got := healthURL(base); got != want {
			t.Errorf("healthURL(%q) = %q, want %q", base, got, want)
		}
	}
	_, url := startServer(t, fixture.Config{APIKey: "health-key"})
	r, err := New(testCfg(url), testImage, "health-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Health(context.Background()); err != nil {
		t.Fatalf("health at the root of %s: %v", url, err)
	}
	bad, err := New(testCfg(url+"/nowhere"), testImage, "health-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("health under a path the server does not serve: %v, want a 404", err)
	}
}

// TestWaitsForExecd: upstream reports Running once the container runs,
// before execd answers (the stand-in starts execd 3 s later); the runner
// waits on GET /ping as the official SDK does (sdks/sandbox/go/sandbox.go
// 171-177) before it uploads the probe, so the start succeeds.
func TestWaitsForExecd(t *testing.T) {
	_, url := startServer(t, fixture.Config{ExecdDelay: 3 * time.Second})
	r, err := New(testCfg(url), testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "execd-late", ProbeDir: probeDir(t), StartTimeout: time.Minute})
	if err != nil {
		t.Fatalf("start against a server whose execd answers 3s after Running: %v", err)
	}
	defer sb.Close(context.Background())
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("started in %v, before execd could answer", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := sb.Exec(ctx, []string{"test", "-x", runners.ProbeMount + "/" + runners.ProbeBinary}); err != nil || res.ExitCode != 0 {
		t.Errorf("the probe binary is not in place after the start: exit %d, %v", res.ExitCode, err)
	}
}
