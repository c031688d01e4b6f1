package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ErrImageNotFound means the image is not in the local engine. sandcheck never
// pulls: images are built or loaded locally.
var ErrImageNotFound = errors.New("image not found locally (sandcheck never pulls images: build or load it first)")

var (
	sharedMu sync.Mutex
	shared   *client.Client
)

// engine returns the package's one engine client, reached through
// DOCKER_HOST (with DOCKER_API_VERSION, DOCKER_CERT_PATH and
// DOCKER_TLS_VERIFY) or the default socket, as `sandcheck doctor` reaches
// it, with the API version negotiated down to the engine's on a first ping.
// A failure is not remembered: the next call tries again.
func engine(ctx context.Context) (*client.Client, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		return shared, nil
	}
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker engine not reachable at %s: %w", configuredHost(), err)
	}
	// Ping now, so an engine that is not there fails within ctx with the
	// address tried, and every later call uses the negotiated version.
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, fmt.Errorf("docker engine not reachable at %s: %w", c.DaemonHost(), err)
	}
	shared = c
	return c, nil
}

// configuredHost names the engine address for errors when no client exists.
func configuredHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// Ping checks that the Docker engine answers. The error names the address
// tried: "docker engine not reachable at <host>: ...".
func Ping(ctx context.Context) error {
	c, err := engine(ctx)
	if err != nil {
		return err
	}
	if _, err := c.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker engine not reachable at %s: %w", c.DaemonHost(), err)
	}
	return nil
}

// Client returns the engine client the package uses (API version already
// negotiated), for harness code that must talk to the same engine, such as
// creating the harness network.
func Client(ctx context.Context) (*client.Client, error) {
	return engine(ctx)
}

// ImageDigest returns the local image's ID (sha256:...), the content digest
// of its configuration, which every locally built image has; registry
// manifest digests exist only for pulled or pushed images. Containers are
// created from this ID. A missing image wraps ErrImageNotFound.
func ImageDigest(ctx context.Context, ref string) (string, error) {
	c, err := engine(ctx)
	if err != nil {
		return "", err
	}
	return imageID(ctx, c, ref)
}

func imageID(ctx context.Context, c client.APIClient, ref string) (string, error) {
	if err := checkImageRef(ref); err != nil {
		return "", err
	}
	img, err := c.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspecting image %s: %w", ref, ErrImageNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	if img.ID == "" {
		return "", fmt.Errorf("inspecting image %s: the engine gave no image ID", ref)
	}
	return img.ID, nil
}
