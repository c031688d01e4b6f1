package output

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxDepth bounds how deep Walk descends.
const maxDepth = 32

// Walk inspects a folder a sandbox wrote and that is released as-is (a
// bind-mounted output folder). It writes nothing, follows no link (every
// entry is looked at with lstat through an os.Root; files are opened with
// O_NOFOLLOW|O_NONBLOCK and checked to be the entry lstat saw, so a fifo or
// a swapped-in link is never read) and stops at the same bounds as ReadTar.
// Every artifact it records is Released: it already sits in the folder.
func Walk(dir string, lim Limits) *Release {
	lim = lim.withDefaults()
	rel := &Release{Mode: ModeBind, Source: "folder", Dest: dir, Limits: lim, Artifacts: []Artifact{}}
	root, err := os.OpenRoot(dir)
	if err != nil {
		rel.fail(fmt.Errorf("opening released folder: %w", err))
		return rel
	}
	defer root.Close()
	type level struct {
		rel   string
		depth int
	}
	queue := []level{{".", 0}}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		names, err := readNames(root, d.rel, lim.MaxFiles-rel.Entries+1)
		if err != nil {
			rel.fail(fmt.Errorf("listing %s: %w", escapeName(d.rel), err))
			continue
		}
		for _, n := range names {
			if rel.Entries == lim.MaxFiles {
				rel.fail(fmt.Errorf("%w: more than %d entries", ErrBound, lim.MaxFiles))
				return rel
			}
			rel.Entries++
			p := path.Join(d.rel, n)
			a := walkOne(root, p, n, rel, lim)
			if a.Kind == KindDir && len(a.Flags) == 0 {
				if d.depth+1 >= maxDepth {
					rel.fail(fmt.Errorf("%w: deeper than %d folders at %s", ErrBound, maxDepth, a.Path))
				} else {
					queue = append(queue, level{p, d.depth + 1})
				}
			}
			rel.Artifacts = append(rel.Artifacts, a)
		}
	}
	return rel
}

// readNames lists up to max names of one folder under root.
func readNames(root *os.Root, dir string, max int) ([]string, error) {
	f, err := root.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	for len(names) < max {
		batch, err := f.Readdirnames(min(256, max-len(names)))
		names = append(names, batch...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return names, err
		}
	}
	return names, nil
}

// walkOne records one entry of a released folder.
func walkOne(root *os.Root, p, name string, rel *Release, lim Limits) Artifact {
	a := Artifact{Path: escapeName(p), Released: true}
	checkName(&a, name)
	fi, err := root.Lstat(p)
	if err != nil {
		a.Kind = KindOther
		a.flag(FlagUnreadable)
		a.Findings = append(a.Findings, "lstat: "+err.Error())
		return a
	}
	a.Size = fi.Size()
	switch m := fi.Mode(); {
	case m.IsDir():
		a.Kind = KindDir
	case m&fs.ModeSymlink != 0:
		a.Kind = KindSymlink
		a.flag(FlagSymlink)
		t, err := root.Readlink(p)
		if err != nil {
			a.Findings = append(a.Findings, "readlink: "+err.Error())
		}
		a.LinkTarget = escapeName(t)
		if linkOutside(p, t) {
			a.flag(FlagSymlinkOutside)
		}
	case m&fs.ModeNamedPipe != 0:
		a.Kind = KindFifo
		a.flag(FlagSpecial)
	case m&fs.ModeCharDevice != 0:
		a.Kind = KindChar
		a.flag(FlagSpecial)
	case m&fs.ModeDevice != 0:
		a.Kind = KindBlock
		a.flag(FlagSpecial)
	case m&fs.ModeSocket != 0:
		a.Kind = KindSocket
		a.flag(FlagSpecial)
	case m.IsRegular():
		a.Kind = KindFile
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			a.flag(FlagHardlink)
		}
		b, err := readFile(root, p, fi, rel, &a, lim)
		if err != nil {
			a.flag(FlagUnreadable)
			a.Findings = append(a.Findings, "read: "+err.Error())
			break
		}
		_ = b
	default:
		a.Kind = KindOther
		a.flag(FlagSpecial)
	}
	return a
}

// readFile reads a regular file of the released folder within the bounds,
// making sure the file opened is the one lstat saw.
func readFile(root *os.Root, p string, fi fs.FileInfo, rel *Release, a *Artifact, lim Limits) ([]byte, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !got.Mode().IsRegular() || !os.SameFile(fi, got) {
		return nil, errors.New("the entry changed between lstat and open")
	}
	return readBounded(f, got.Size(), a, rel, lim)
}
