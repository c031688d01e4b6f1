package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// ErrImageNotFound means the image is not in the local engine. sandcheck never
// pulls: images are built or loaded locally.
var ErrImageNotFound = errors.New("image not found locally (sandcheck never pulls images: build or load it first)")

var (
	sharedMu  sync.Mutex
	shared    *testcontainers.DockerClient
	routeOnce sync.Once
)

// engine returns the package's one engine client, resolved the way
// testcontainers-go resolves it (its properties file, DOCKER_HOST, the
// Docker context, the default socket) with the API version negotiated down
// to the engine's. A failure is not remembered: the next call tries again.
func engine(ctx context.Context) (*testcontainers.DockerClient, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		return shared, nil
	}
	if err := checkTestcontainersConfig(); err != nil {
		return nil, err
	}
	routeOnce.Do(func() { tclog.SetDefault(tcLogger{}) })
	// The client negotiates the API version on its first request.
	c, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker engine not reachable at %s: %w", configuredHost(), err)
	}
	// testcontainers-go falls back to the default socket when DOCKER_HOST
	// does not answer; a user who named an engine must get that engine or
	// an error, never another one.
	if h := os.Getenv("DOCKER_HOST"); h != "" && c.DaemonHost() != h {
		c.Close()
		return nil, fmt.Errorf("docker engine not reachable at DOCKER_HOST=%s (refusing to fall back to %s)", h, c.DaemonHost())
	}
	shared = c
	return c, nil
}

// checkTestcontainersConfig turns testcontainers-go's reaper off unless the
// environment already decided, and refuses settings that would make it pull
// images.
func checkTestcontainersConfig() error {
	const ryuk = "TESTCONTAINERS_RYUK_DISABLED"
	if _, set := os.LookupEnv(ryuk); !set {
		if err := os.Setenv(ryuk, "true"); err != nil {
			return fmt.Errorf("setting %s: %w", ryuk, err)
		}
	}
	cfg := testcontainers.ReadConfig()
	if !cfg.RyukDisabled {
		return fmt.Errorf("testcontainers-go's reaper is enabled (%s or ryuk.disabled in ~/.testcontainers.properties): sandcheck needs it off, the reaper image would be pulled and run with the engine socket", ryuk)
	}
	if cfg.Config.HubImageNamePrefix != "" {
		return fmt.Errorf("testcontainers-go's hub image prefix is set (%q): it would rename local images and pull them; unset it", cfg.Config.HubImageNamePrefix)
	}
	return nil
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
	c, err := engine(ctx)
	if err != nil {
		return nil, err
	}
	return c.Client, nil
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

// tcLogger routes testcontainers-go's messages to slog at debug level; a nil
// logger means slog.Default at the time of the call.
type tcLogger struct{ l *slog.Logger }

// Printf implements testcontainers-go's log.Logger.
func (t tcLogger) Printf(format string, v ...any) {
	l := t.l
	if l == nil {
		l = slog.Default()
	}
	l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers-go")
}
