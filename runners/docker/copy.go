package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/moby/moby/client"
)

// CopyIn copies one regular host file to sandboxPath (absolute; its folder
// must exist) through the engine's copy API, streaming it as a one-file tar.
// The file keeps its permission bits (not setuid/setgid) and is owned by
// root. The engine cannot copy into a container whose root filesystem is
// read-only, not even into its tmpfs mounts: such a copy fails.
func (s *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	if !path.IsAbs(sandboxPath) || path.Clean(sandboxPath) != sandboxPath || sandboxPath == "/" {
		return fmt.Errorf("copying %s in: %q is not a clean absolute file path", hostPath, sandboxPath)
	}
	f, err := os.Open(hostPath)
	if err != nil {
		return fmt.Errorf("copying in: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("copying %s in: not a regular file (%s)", hostPath, fi.Mode().Type())
	}

	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeTar(pw, f, path.Base(sandboxPath), fi)
		pw.CloseWithError(err)
		written <- err
	}()
	_, err = s.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{
		DestinationPath: path.Dir(sandboxPath), Content: pr,
	})
	pr.CloseWithError(io.ErrClosedPipe) // stops the writer if the engine gave up early
	werr := <-written
	switch {
	case err != nil && strings.Contains(err.Error(), "read-only"):
		return fmt.Errorf("copying %s to %s: the container's root filesystem is read-only: %w", hostPath, sandboxPath, err)
	case err != nil:
		return fmt.Errorf("copying %s to %s: %w", hostPath, sandboxPath, err)
	case werr != nil:
		return fmt.Errorf("copying %s to %s: %w", hostPath, sandboxPath, werr)
	}
	return nil
}

// writeTar writes a tar holding one regular file of fi's size; a file that
// grows while being read is cut at that size, one that shrinks is an error.
func writeTar(w io.Writer, r io.Reader, name string, fi os.FileInfo) error {
	tw := tar.NewWriter(w)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     int64(fi.Mode().Perm()),
		Size:     fi.Size(),
		ModTime:  fi.ModTime(),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing tar header: %w", err)
	}
	if _, err := io.CopyN(tw, r, fi.Size()); err != nil {
		return fmt.Errorf("reading file: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing tar: %w", err)
	}
	return nil
}
