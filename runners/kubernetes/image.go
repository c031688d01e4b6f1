package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The probe image's layout: the probe binary where every runner puts it,
// and a static busybox whose cp the init container runs.
const (
	probeInImage   = ".sandcheck/sandcheck-probe"
	busyboxInImage = "bin/busybox"
	// hostBusybox is Debian's busybox-static (scripts/setup.sh installs it).
	hostBusybox = "/bin/busybox"
)

// probeImageName is the reference of the probe image for one probe binary:
// its content digest is in the tag, so a rebuilt binary is a new image.
func probeImageName(probeSum string) string { return "sandcheck.local/probe:" + probeSum[:16] }

// ensureProbeImage builds the probe image from the binary and imports it
// into the node's containerd unless it is there already; it returns the
// image's reference.
func ensureProbeImage(ctx context.Context, sock, probeBin string) (string, error) {
	probe, err := os.ReadFile(probeBin)
	if err != nil {
		return "", fmt.Errorf("reading the probe binary for the probe image: %w", err)
	}
	sum := sha256.Sum256(probe)
	name := probeImageName(hex.EncodeToString(sum[:]))
	if _, err := os.Stat(sock); err != nil {
		return "", fmt.Errorf("the node's containerd socket %s (kubernetes.containerd): %w; name an image with kubernetes.probe_image instead", sock, err)
	}
	have, err := ctr(ctx, sock, nil, "images", "ls", "-q")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(have, "\n") {
		if strings.TrimSpace(l) == name {
			return name, nil
		}
	}
	bb, err := os.ReadFile(hostBusybox)
	if err != nil {
		return "", fmt.Errorf("reading %s for the probe image (install busybox-static): %w", hostBusybox, err)
	}
	img, err := ociArchive(name, map[string][]byte{probeInImage: probe, busyboxInImage: bb})
	if err != nil {
		return "", err
	}
	if _, err := ctr(ctx, sock, bytes.NewReader(img), "images", "import", "-"); err != nil {
		return "", fmt.Errorf("importing the probe image %s: %w", name, err)
	}
	return name, nil
}

// ctr runs containerd's ctr against sock in the k8s.io namespace (the one
// the CRI plugin uses); its output is bounded.
func ctr(ctx context.Context, sock string, stdin io.Reader, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	cmd.Stdin = stdin
	var out, errb capped
	out.max, errb.max = 1<<20, 8<<10
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// ociArchive writes a one-layer OCI image archive (oci-layout, index.json,
// blobs) holding files, as `ctr images import` reads it.
func ociArchive(name string, files map[string][]byte) ([]byte, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, p := range sortedKeys(files) {
		if d := p[:strings.LastIndex(p, "/")+1]; d != "" && !dirs[d] {
			dirs[d] = true
			if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o755, Size: int64(len(files[p])), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := lw.Write(files[p]); err != nil {
			return nil, err
		}
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	blobs := map[string][]byte{}
	put := func(b []byte) (string, int) {
		s := sha256.Sum256(b)
		d := hex.EncodeToString(s[:])
		blobs[d] = b
		return "sha256:" + d, len(b)
	}
	ldig, lsize := put(layer.Bytes())
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/" + probeInImage}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{ldig}},
	})
	cdig, csize := put(cfg)
	man, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csize},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": lsize}},
	})
	mdig, msize := put(man)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdig, "size": msize,
			"platform":    map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name[strings.LastIndex(name, ":")+1:]},
		}},
	})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	add := func(p string, b []byte) error {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err := w.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	if err := add("index.json", index); err != nil {
		return nil, err
	}
	for _, d := range sortedKeys(blobs) {
		if err := add("blobs/sha256/"+d, blobs[d]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slicesSort(keys)
	return keys
}
