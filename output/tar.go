package output

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
)

// headerAllowance is the stream bytes allowed per entry beyond its content
// (headers, PAX records, padding).
const headerAllowance = 4 << 10

// ReadTar reads a tar stream from inside a sandbox and releases its clean
// regular files into dest, an existing empty folder. It stops at the first
// bound reached (entries, stream bytes) and never writes outside dest: only
// unflagged regular files under clean relative names are written, created
// exclusively through an os.Root, so no name, link or duplicate can place a
// file elsewhere or overwrite one. It never fails: what went wrong is in the
// Release.
func ReadTar(r io.Reader, dest string, lim Limits) *Release {
	lim = lim.withDefaults()
	rel := &Release{Mode: ModeGated, Source: "tar-stream", Dest: dest, Limits: lim, Artifacts: []Artifact{}}
	root, err := os.OpenRoot(dest)
	if err != nil {
		rel.fail(fmt.Errorf("opening release folder: %w", err))
		return rel
	}
	defer root.Close()
	streamCap := lim.MaxTotalBytes + int64(lim.MaxFiles+1)*headerAllowance
	cr := &capReader{r: r, left: streamCap}
	tr := tar.NewReader(cr)
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cr.over {
				err = fmt.Errorf("%w: the stream passed %d bytes", ErrBound, streamCap)
			}
			rel.fail(fmt.Errorf("reading the output stream: %w", err))
			break
		}
		if rel.Entries == lim.MaxFiles {
			rel.fail(fmt.Errorf("%w: more than %d entries", ErrBound, lim.MaxFiles))
			break
		}
		rel.Entries++
		a := Artifact{Path: escapeName(hdr.Name), Size: hdr.Size, Kind: tarKind(hdr.Typeflag)}
		clean, ok := checkName(&a, hdr.Name)
		if ok && seen[clean] {
			a.flag(FlagDuplicateName)
			ok = false
		}
		if ok {
			seen[clean] = true
		}
		var content []byte
		switch a.Kind {
		case KindSymlink:
			a.LinkTarget = escapeName(hdr.Linkname)
			a.flag(FlagSymlink)
			if linkOutside(hdr.Name, hdr.Linkname) {
				a.flag(FlagSymlinkOutside)
			}
		case KindHardlink:
			a.LinkTarget = escapeName(hdr.Linkname)
			a.flag(FlagHardlink)
		case KindFifo, KindChar, KindBlock, KindSocket, KindOther:
			a.flag(FlagSpecial)
		case KindFile:
			if hdr.Size < 0 {
				a.flag(FlagUnreadable)
				break
			}
			content, err = readBounded(tr, hdr.Size, &a, rel, lim)
			if err != nil {
				if cr.over {
					err = fmt.Errorf("%w: the stream passed %d bytes", ErrBound, streamCap)
				}
				a.flag(FlagUnreadable)
				rel.Artifacts = append(rel.Artifacts, a)
				rel.fail(fmt.Errorf("reading %s: %w", a.Path, err))
				return rel
			}
		}
		if ok && len(a.Flags) == 0 {
			switch a.Kind {
			case KindDir:
				if err := root.MkdirAll(clean, 0o755); err == nil {
					a.Released = true
				}
			case KindFile:
				if err := writeExclusive(root, clean, content); err != nil {
					a.Findings = append(a.Findings, "not released: "+err.Error())
				} else {
					a.Released = true
				}
			}
		}
		rel.Artifacts = append(rel.Artifacts, a)
	}
	return rel
}

// readBounded reads the content of one file up to the per-file and total
// bounds, flags what it could not read, and inspects what it did.
func readBounded(r io.Reader, size int64, a *Artifact, rel *Release, lim Limits) ([]byte, error) {
	left := lim.MaxTotalBytes - rel.Bytes
	if left <= 0 && size > 0 {
		a.flag(FlagOverTotal)
		return nil, nil
	}
	want := min(size, lim.MaxFileBytes, left)
	b := make([]byte, want)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	rel.Bytes += want
	if size > lim.MaxFileBytes {
		a.flag(FlagOversize)
	} else if size > want {
		a.flag(FlagOverTotal)
	}
	inspect(a, b, want == size, lim)
	return b, nil
}

// writeExclusive creates name (and its folders) under root; it fails
// rather than replace or follow anything that is there.
func writeExclusive(root *os.Root, name string, b []byte) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating folder: %w", err)
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("creating file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("writing file: %w", err)
	}
	return f.Close()
}

func tarKind(t byte) string {
	switch t {
	case tar.TypeReg, tar.TypeRegA:
		return KindFile
	case tar.TypeDir:
		return KindDir
	case tar.TypeSymlink:
		return KindSymlink
	case tar.TypeLink:
		return KindHardlink
	case tar.TypeFifo:
		return KindFifo
	case tar.TypeChar:
		return KindChar
	case tar.TypeBlock:
		return KindBlock
	}
	return KindOther
}

// capReader ends a stream with an error once it passes its allowance.
type capReader struct {
	r    io.Reader
	left int64
	over bool
}

var errStreamCap = errors.New("stream bound reached")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.over = true
		return 0, errStreamCap
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
