package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// TestNamedNetwork joins a sandbox to a network named by the harness, and
// refuses an image whose exposed ports testcontainers-go would publish on the
// host. The network is internal and carries no traffic.
func TestNamedNetwork(t *testing.T) {
	requireEngine(t)
	ctx := context.Background()
	cli := engineClient(t)
	spec, mark := testSpec(t, fakeProbe(t))
	netName := "sandcheck-test-" + mark
	if _, err := cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{
		Driver: "bridge", Internal: true, Labels: map[string]string{labelTest: mark},
	}); err != nil {
		t.Fatalf("creating network: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cli.NetworkRemove(context.Background(), netName, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("removing network: %v", err)
		}
	})
	spec.Network = netName
	cfg := hardened("runc")
	cfg.Network = "harness"

	sb := start(t, cfg, spec)
	view, err := sb.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if view.NetworkMode != netName {
		t.Errorf("network mode %q, want %q", view.NetworkMode, netName)
	}

	exposed := "sandcheck-test-exposed:" + mark
	buildImage(t, exposed, "FROM "+testImage+"\nEXPOSE 8080\n", mark)
	r, err := New(cfg, exposed)
	if err != nil {
		t.Fatal(err)
	}
	sb2, err := r.Start(ctx, spec)
	if err == nil {
		sb2.Close(ctx)
		t.Fatal("a sandbox whose image exposes a port started on a named network")
	}
	if !errors.Is(err, runners.ErrStart) || !strings.Contains(err.Error(), "published") {
		t.Errorf("error %q, want ErrStart about published ports", err)
	}
}

// buildImage builds a throw-away local image from a Dockerfile and removes it
// at cleanup.
func buildImage(t *testing.T, tag, dockerfile, mark string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, dockerfile); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cli := engineClient(t)
	res, err := cli.ImageBuild(context.Background(), &buf, client.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Labels: map[string]string{labelTest: mark},
	})
	if err != nil {
		t.Fatalf("building %s: %v", tag, err)
	}
	out, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	if _, err := ImageDigest(context.Background(), tag); err != nil {
		t.Fatalf("building %s: %v\n%s", tag, err, out)
	}
}
