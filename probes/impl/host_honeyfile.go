package impl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"host.honeyfile": honeyfile})
}

// Bounds of the honeyfile search (catalog: 200000 directory entries, depth 12).
const (
	honeyMaxEntries = 200000
	honeyMaxDepth   = 12
	honeyMaxFound   = 8   // stop after this many honeyfiles: the proof is made
	honeyReadMax    = 256 // bytes read of a honeyfile
	honeyTokenMax   = 128 // bytes of its first line reported
)

// walker is a breadth-first, bounded directory walk that never follows a
// symbolic link: directories are opened with O_NOFOLLOW and only entries the
// directory itself says are directories are entered.
type walker struct {
	ctx     context.Context
	skip    map[string]bool // paths not entered (pseudo filesystems, probe dir)
	seen    map[[2]uint64]bool
	entries int
	dirs    int
	errs    int
	stopped string // why the walk ended early, "" if it finished
	found   []string
}

type walkItem struct {
	path  string
	depth int
}

// walk visits roots in order, then what lies below them, breadth first, so
// that within the bound the shallow levels of every root are covered first.
func (w *walker) walk(roots []string) {
	queue := make([]walkItem, 0, len(roots))
	for _, r := range roots {
		queue = append(queue, walkItem{r, 0})
	}
	for len(queue) > 0 && w.stopped == "" && len(w.found) < honeyMaxFound {
		it := queue[0]
		queue = queue[1:]
		if w.ctx.Err() != nil {
			w.stopped = "deadline"
			break
		}
		queue = w.visit(it, queue)
	}
}

func (w *walker) visit(it walkItem, queue []walkItem) []walkItem {
	fd, err := unix.Open(it.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			w.errs++
		}
		return queue
	}
	f := os.NewFile(uintptr(fd), it.path)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		w.errs++
		return queue
	}
	id := [2]uint64{uint64(st.Dev), st.Ino}
	if w.seen[id] {
		return queue
	}
	w.seen[id] = true
	w.dirs++
	for {
		ents, err := f.ReadDir(256)
		for _, d := range ents {
			if w.entries++; w.entries > honeyMaxEntries {
				w.stopped = "entry bound"
				return queue
			}
			p := filepath.Join(it.path, d.Name())
			switch {
			case d.Type().IsRegular() && strings.HasPrefix(d.Name(), probes.HoneyPrefix):
				w.found = append(w.found, p)
			case d.IsDir() && !w.skip[p] && it.depth+1 <= honeyMaxDepth:
				queue = append(queue, walkItem{p, it.depth + 1})
			}
		}
		if err != nil {
			if err != io.EOF {
				w.errs++
			}
			return queue
		}
	}
}

// readHoney returns the first line of a honeyfile, trimmed and bounded. It
// opens without following links and without blocking on a FIFO.
func readHoney(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("opening honeyfile: %w", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, honeyReadMax)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return "", fmt.Errorf("reading honeyfile: %w", err)
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) > honeyTokenMax {
		line = line[:honeyTokenMax]
	}
	return string(line), nil
}

// honeyfile searches the box's filesystem for a file whose name starts with
// probes.HoneyPrefix, which the harness plants only on the host. Mount points
// are searched first (that is where host folders appear), then the whole tree;
// kernel pseudo filesystems and the probe directory are skipped. A search cut
// short by its bound without a find is inconclusive: a part went unsearched.
func honeyfile(ctx context.Context, p probes.Params) probes.Result {
	w := &walker{ctx: ctx, seen: map[[2]uint64]bool{},
		skip: map[string]bool{"/proc": true, "/sys": true, "/dev": true}}
	if p.ProbeDir != "" {
		w.skip[filepath.Clean(p.ProbeDir)] = true
	}
	ms, _ := readMountinfo() // without it the walk from "/" still covers everything
	for _, m := range ms {
		if pseudoFSTypes[m.FSType] {
			w.skip[m.Target] = true
		}
	}
	var roots []string
	for _, m := range ms {
		if m.Target != "/" && !w.skip[m.Target] && !skippedBelow(m.Target, w.skip) {
			roots = append(roots, m.Target)
		}
	}
	sort.Strings(roots)
	w.walk(append(roots, "/"))

	e := ev{}
	e.setInt("entries_scanned", min(w.entries, honeyMaxEntries))
	e.setInt("dirs_scanned", w.dirs)
	e.setInt("open_errors", w.errs)
	if len(w.found) == 0 {
		if w.stopped != "" {
			e.set("stopped", w.stopped)
			return inconclusive("the search stopped at its "+w.stopped+" without finding a honeyfile", e)
		}
		return blocked("no honeyfile anywhere in the box's filesystem", e)
	}
	e.setInt("honeyfile_count", len(w.found))
	for i, f := range w.found {
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf(".%d", i+1)
		}
		e.set("honeyfile_path"+suffix, f)
		if tok, err := readHoney(f); err != nil {
			e.setErr("honeyfile_read"+suffix+"_", err)
		} else {
			e.set("honeyfile_token"+suffix, tok)
		}
	}
	return escaped("found a honeyfile the harness planted on the host: "+w.found[0], e)
}

// skippedBelow reports whether path lies under a skipped path.
func skippedBelow(path string, skip map[string]bool) bool {
	for s := range skip {
		if underDir(path, s) {
			return true
		}
	}
	return false
}
