package opensandbox

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// TestResourceLimitsAlwaysSent: upstream refuses a create without
// resourceLimits (server api/schema.py 519-520); the runner sends the
// target's, or the official SDK's default (sdks/sandbox/go/constants.go
// 58-61) when the target names none.
func TestResourceLimitsAlwaysSent(t *testing.T) {
	for _, c := range []struct {
		res  *targets.OpenSandboxResources
		want map[string]string
	}{
		{nil, map[string]string{"cpu": "1", "memory": "2Gi"}},
		{&targets.OpenSandboxResources{CPU: "500m", Memory: "256Mi"}, map[string]string{"cpu": "500m", "memory": "256Mi"}},
		{&targets.OpenSandboxResources{Memory: "1Gi"}, map[string]string{"memory": "1Gi"}},
	} {
		r, err := New(targets.OpenSandbox{URL: "http://127.0.0.1:1/v1", Resources: c.res}, testImage, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := r.request(runners.SandboxSpec{Name: "n"}).ResourceLimits
		if !maps.Equal(got, c.want) {
			t.Errorf("resources %+v: resourceLimits %v, want %v", c.res, got, c.want)
		}
	}
	if DefaultResourceLimits["cpu"] != "1" || DefaultResourceLimits["memory"] != "2Gi" {
		t.Errorf("default %v drifted from the SDK's {cpu: 1, memory: 2Gi}", DefaultResourceLimits)
	}
}

// TestCreateRefusedWithoutLimits: the stand-in answers a create without
// resourceLimits 422 as upstream, and the runner's error names FastAPI's
// message; a target without resources still starts, with the default
// limits applied by the server.
func TestCreateRefusedWithoutLimits(t *testing.T) {
	_, url := startServer(t, fixture.Config{})
	cfg := testCfg(url)
	cfg.Resources = nil
	r, err := New(cfg, testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := r.request(runners.SandboxSpec{Name: "no-limits"})
	req.ResourceLimits = nil
	if _, err := r.api.create(context.Background(), req); err == nil || !strings.Contains(err.Error(), "422") ||
		!strings.Contains(err.Error(), "resourceLimits is required when poolRef is not provided") {
		t.Fatalf("create without resourceLimits: %v, want the 422 with FastAPI's message", err)
	}
	sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "default-limits", ProbeDir: probeDir(t), StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, []string{"sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "2147483648" {
		t.Errorf("memory limit %q (stderr %q, %v), want 2Gi, the default limits", res.Stdout, res.Stderr, err)
	}
}

// TestOpenNamesDefaultLimits: a target without resources is told, at the
// run's start, which limits the runner asks for on its behalf.
func TestOpenNamesDefaultLimits(t *testing.T) {
	_, url := startServer(t, fixture.Config{})
	cfg := testCfg(url)
	cfg.Resources = nil
	var logs bytes.Buffer
	r, err := Open(context.Background(), &targets.Target{Path: "t.yaml", Image: testImage, OpenSandbox: &cfg},
		runners.RunEnv{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	_ = r
	if !strings.Contains(logs.String(), "cpu=1 memory=2Gi") {
		t.Errorf("Open's log does not name the default limits: %q", logs.String())
	}
}
