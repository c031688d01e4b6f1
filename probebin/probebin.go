// Package probebin holds the static probe binary that the sandcheck CLI
// carries inside itself, so that a binary installed with `go install` or
// copied alone onto a machine can run a target with nothing beside it.
//
// The embedded copy is made by `make probe-embed` with scripts/build-probe.sh
// and is checked against the probe's sources by this package's drift test.
// An explicit probe binary (--probe-binary, $SANDCHECK_BIN, one beside the
// executable or in ./bin) always wins over it.
package probebin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNone is returned on platforms for which the CLI carries no probe.
var ErrNone = errors.New("this sandcheck binary carries no embedded probe for its platform (build one with `make build` and pass --probe-binary)")

// maxProbe bounds the decompressed probe, far above its real size (about
// 10 MB), so a corrupt embed cannot make extraction fill the disk.
const maxProbe = 64 << 20

// Binary returns the embedded probe, decompressed, and its SHA-256 digest in
// hex.
func Binary() ([]byte, string, error) {
	if len(probeGz) == 0 {
		return nil, "", ErrNone
	}
	zr, err := gzip.NewReader(bytes.NewReader(probeGz))
	if err != nil {
		return nil, "", fmt.Errorf("reading the embedded probe: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxProbe+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading the embedded probe: %w", err)
	}
	if len(b) > maxProbe {
		return nil, "", fmt.Errorf("reading the embedded probe: larger than %d bytes", maxProbe)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// Path returns the path of the embedded probe written out under the user's
// cache folder (os.UserCacheDir()/sandcheck/probe/DIGEST/sandcheck-probe),
// writing it first when it is missing or does not hold exactly the embedded
// bytes. The file is never reached through a symbolic link.
func Path() (string, error) {
	b, digest, err := Binary()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache folder for the embedded probe: %w", err)
	}
	dir := filepath.Join(cache, "sandcheck", "probe", digest[:16])
	path := filepath.Join(dir, "sandcheck-probe")
	if holds(path, digest) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("writing the embedded probe: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".sandcheck-probe-*")
	if err != nil {
		return "", fmt.Errorf("writing the embedded probe: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing the embedded probe to %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing the embedded probe to %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("writing the embedded probe to %s: %w", tmp.Name(), err)
	}
	// rename replaces a symbolic link planted at path instead of following it.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing the embedded probe to %s: %w", path, err)
	}
	if !holds(path, digest) {
		return "", fmt.Errorf("writing the embedded probe to %s: the file written does not hold the embedded probe", path)
	}
	return path, nil
}

// holds reports whether path is a regular file, reached without following
// a link, whose content has the given digest.
func holds(path, digest string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxProbe {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxProbe)); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == digest
}
