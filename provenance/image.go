package provenance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/daemon"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"
)

// parseOpts accept plain-HTTP registries: the Docker engine's rule, only for
// loopback (name.Insecure applies to every host, so Ref checks first).
var parseOpts = []name.Option{name.Insecure}

// ParseRef parses an image reference. Only references to a loopback
// registry are accepted, since nothing here may leave the machine.
func ParseRef(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s, append(parseOpts, name.StrictValidation)...)
	if err != nil {
		ref, err = name.ParseReference(s, parseOpts...)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing image reference %q: %w", s, err)
	}
	if !loopbackRegistry(ref.Context().RegistryStr()) {
		return nil, fmt.Errorf("image reference %q: registry %s is not on loopback (127.0.0.1, [::1] or localhost)", s, ref.Context().RegistryStr())
	}
	return ref, nil
}

func loopbackRegistry(host string) bool {
	h := host
	if i := strings.LastIndex(h, ":"); i > 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
}

func remoteOpts(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx)}
}

// PushLocal copies the image the Docker engine holds as local (a tag or ID)
// to dst (a tag in a loopback registry) and returns dst pinned by the
// digest the registry now serves.
func PushLocal(ctx context.Context, local, dst string) (name.Digest, error) {
	lref, err := name.ParseReference(local)
	if err != nil {
		return name.Digest{}, fmt.Errorf("parsing local image %q: %w", local, err)
	}
	dref, err := ParseRef(dst)
	if err != nil {
		return name.Digest{}, err
	}
	img, err := daemon.Image(lref, daemon.WithContext(ctx))
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading %s from the Docker engine: %w", local, err)
	}
	return Push(ctx, img, dref)
}

// Push writes img to ref in a registry and returns it pinned by digest.
func Push(ctx context.Context, img v1.Image, ref name.Reference) (name.Digest, error) {
	if err := remote.Write(ref, img, remoteOpts(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	h, err := img.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref.Context().Digest(h.String()), nil
}

// Resolve asks the registry which digest ref names now (a digest reference
// resolves to itself once the registry confirms it holds it).
func Resolve(ctx context.Context, ref name.Reference) (name.Digest, error) {
	desc, err := remote.Head(ref, remoteOpts(ctx)...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("resolving %s: %w", ref, err)
	}
	return ref.Context().Digest(desc.Digest.String()), nil
}

// PullToEngine has the Docker engine pull ref (by digest) from the
// registry, so a sandbox can start from exactly that image.
func PullToEngine(ctx context.Context, ref name.Digest) error {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("connecting to the Docker engine: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := c.ImagePull(ctx, ref.String(), client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("docker pull %s: %w", ref, err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("docker pull %s: %w", ref, err)
	}
	return nil
}

// ConfigDigest is the digest of the image's config blob: the image ID the
// Docker engine shows for it once pulled.
func ConfigDigest(ctx context.Context, ref name.Digest) (string, error) {
	img, err := remote.Image(ref, remoteOpts(ctx)...)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", ref, registryError(err))
	}
	h, err := img.ConfigName()
	if err != nil {
		return "", fmt.Errorf("reading the config of %s: %w", ref, err)
	}
	return h.String(), nil
}
