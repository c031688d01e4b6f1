package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// TestNamedNetwork joins a sandbox to a network named by the harness; an
// image that exposes a port starts there with nothing published on the host,
// and a container that does carry host port bindings is refused. The network
// is internal and carries no traffic.
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
	if err != nil {
		t.Fatalf("a sandbox whose image exposes a port did not start: %v", err)
	}
	t.Cleanup(func() { _ = sb2.Close(context.Background()) })
	in, err := cli.ContainerInspect(ctx, sb2.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := in.Container.HostConfig; hc == nil || len(hc.PortBindings) > 0 || hc.PublishAllPorts {
		t.Errorf("the exposed port was set up for publishing on the host: %+v", hc)
	}
	if ns := in.Container.NetworkSettings; ns != nil {
		for p, b := range ns.Ports {
			if len(b) > 0 {
				t.Errorf("port %s is published on the host: %v", p, b)
			}
		}
	}

	// A container with a host port binding (created, never started, so
	// nothing is bound) must be refused by the check Start runs.
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   "sandcheck-test-bound-" + mark,
		Config: &container.Config{Image: exposed, Labels: map[string]string{labelTest: mark}},
		HostConfig: &container.HostConfig{
			NetworkMode:  container.NetworkMode(netName),
			PortBindings: network.PortMap{network.MustParsePort("8080/tcp"): {{HostPort: "0"}}},
		},
	})
	if err != nil {
		t.Fatalf("creating a container with a port binding: %v", err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	err = checkCreated(ctx, cli, res.ID, netName)
	if err == nil || !strings.Contains(err.Error(), "published") {
		t.Errorf("checkCreated on a container with a host port binding: %v, want a refusal about published ports", err)
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
