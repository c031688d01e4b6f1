package impl

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/output"
)

// PackLimits bound what Pack puts in its stream. Pack keeps one entry and one
// byte past each bound, so the gate on the host sees that a bound was passed.
type PackLimits struct {
	MaxFiles      int
	MaxFileBytes  int64
	MaxTotalBytes int64
}

// packEntryOverhead is what Pack counts for each entry's headers against
// output.MaxPackBytes.
const packEntryOverhead = 1536

// Pack writes the output folder dir as a tar stream to w, for the harness's
// gated release: the harness's stand-in for a platform's copy-out, running
// inside the sandbox because the runtime's own copy cannot see a tmpfs (and
// under gVisor not the folder at all). It never follows a link (links are
// written as links), never opens anything but a regular file (with
// O_NOFOLLOW|O_NONBLOCK, checked to be the entry it listed), and stops at
// its bounds and at output.MaxPackBytes.
func Pack(w io.Writer, dir string, lim PackLimits) error {
	tw := tar.NewWriter(w)
	p := &packer{tw: tw, lim: lim, root: dir}
	err := p.walk(".", 0)
	if errors.Is(err, errPackBound) {
		err = nil
	}
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	return err
}

var errPackBound = errors.New("pack bound reached")

type packer struct {
	tw      *tar.Writer
	lim     PackLimits
	root    string
	entries int
	content int64
	raw     int64
}

func (p *packer) walk(rel string, depth int) error {
	if depth > 16 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(p.root, rel), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", rel, err)
	}
	names, err := f.Readdirnames(p.lim.MaxFiles + 1)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("listing %s: %w", rel, err)
	}
	for _, n := range names {
		if p.entries > p.lim.MaxFiles || p.raw+packEntryOverhead > output.MaxPackBytes {
			return errPackBound
		}
		name := path.Join(rel, n)
		fi, err := os.Lstat(filepath.Join(p.root, name))
		if err != nil {
			continue
		}
		if err := p.entry(name, fi, depth); err != nil {
			return err
		}
	}
	return nil
}

func (p *packer) entry(name string, fi fs.FileInfo, depth int) error {
	h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	full := filepath.Join(p.root, name)
	var body *os.File
	switch m := fi.Mode(); {
	case m.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(full)
		if err != nil {
			return nil
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, t
	case m&fs.ModeNamedPipe != 0:
		h.Typeflag = tar.TypeFifo
	case m&fs.ModeDevice != 0:
		h.Typeflag = tar.TypeBlock
		if m&fs.ModeCharDevice != 0 {
			h.Typeflag = tar.TypeChar
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.Devmajor, h.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		}
	case m.IsRegular():
		f, err := os.OpenFile(full, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		got, err := f.Stat()
		if err != nil || !got.Mode().IsRegular() || !os.SameFile(fi, got) {
			return nil
		}
		room := min(p.lim.MaxTotalBytes+1-p.content, output.MaxPackBytes-p.raw-packEntryOverhead)
		if room <= 0 {
			return errPackBound
		}
		h.Typeflag, h.Size, body = tar.TypeReg, min(got.Size(), p.lim.MaxFileBytes+1, room), f
	default:
		return nil // sockets have no tar form; the gate's folder walk sees them
	}
	if err := p.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("packing %s: %w", name, err)
	}
	p.entries++
	p.raw += packEntryOverhead
	if body != nil {
		// A file that shrank meanwhile is padded with zeros so the stream
		// stays well-formed.
		n, _ := io.Copy(p.tw, io.LimitReader(body, h.Size))
		if n < h.Size {
			if _, err := io.CopyN(p.tw, zeros{}, h.Size-n); err != nil {
				return fmt.Errorf("packing %s: %w", name, err)
			}
		}
		p.content += h.Size
		p.raw += h.Size
	}
	if h.Typeflag == tar.TypeDir {
		return p.walk(name, depth+1)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
