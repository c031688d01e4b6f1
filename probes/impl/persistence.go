package impl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"persistence.rootfs-write":    rootfsWrite,
		"persistence.marker-next-run": markerNextRun,
	})
}

// rootfsDirs are the base-image folders a persistent implant would target.
var rootfsDirs = []string{"/usr/bin", "/etc"}

// rootfsWrite creates (O_EXCL, never over an existing file) and removes an
// empty file in each folder. A folder the image lacks is not tested.
func rootfsWrite(_ context.Context, p probes.Params) probes.Result {
	name := ".sandcheck-" + fileSafe(p.Token)
	if p.Token == "" || fileSafe(p.Token) == "" {
		name = fmt.Sprintf(".sandcheck-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	e := ev{}
	var created, unknown []string
	tested := 0
	for _, dir := range rootfsDirs {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			e.set(pathKey(dir), "absent")
			continue
		}
		tested++
		path := filepath.Join(dir, name)
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
			state := "created and removed"
			if uerr := unix.Unlink(path); uerr != nil {
				state = "created; remove failed: " + uerr.Error()
			}
			e.set(pathKey(dir), state)
			created = append(created, dir)
			continue
		}
		n, _ := err.(unix.Errno)
		e.set(pathKey(dir), errnoLabel(n))
		if !refusedErrno(n) {
			unknown = append(unknown, dir)
		}
	}
	switch {
	case len(created) > 0:
		return escaped("wrote to the base image in "+strings.Join(created, ", "), e)
	case tested == 0:
		return inconclusive("none of "+strings.Join(rootfsDirs, ", ")+" exists to be tested", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error creating a file in "+strings.Join(unknown, ", "), e)
	}
	return blocked("the base image refused new files", e)
}

// markerPlaces lists the directories where state could outlive a run: the
// usual scratch and home folders, and every writable mount of the box (a
// shared volume or host folder is the likeliest path into the next run). The
// kernel's pseudo filesystems and the probe directory are left out.
func markerPlaces(probeDir string) []string {
	cands := []string{"/tmp", "/var/tmp", "/dev/shm", os.Getenv("HOME"), "/root"}
	if ents, err := os.ReadDir("/home"); err == nil {
		for i, d := range ents {
			if i == 64 {
				break
			}
			if d.IsDir() {
				cands = append(cands, filepath.Join("/home", d.Name()))
			}
		}
	}
	ms, _ := readMountinfo()
	for _, m := range ms {
		t := m.Target
		if m.ReadOnly() || pseudoFSTypes[m.FSType] || t == "/dev" || underDir(t, "/proc") || underDir(t, "/sys") {
			continue
		}
		cands = append(cands, t)
	}
	seen := map[[2]uint64]bool{}
	var out []string
	for _, c := range cands {
		if c == "" || underDir(c, probeDir) {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(c, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		id := [2]uint64{uint64(st.Dev), st.Ino}
		if !seen[id] {
			seen[id] = true
			out = append(out, filepath.Clean(c))
		}
	}
	sort.Strings(out)
	return out
}

// markerNextRun plants (phase plant) or looks for (phase check) a file named
// probes.MarkerPrefix+marker in every place. The harness runs plant in one
// sandbox and check in the next one of the same target: a marker found there
// survived from one run into another.
func markerNextRun(_ context.Context, p probes.Params) probes.Result {
	marker := fileSafe(p.Marker)
	if marker == "" {
		marker = fileSafe(p.Token)
	}
	e := ev{}
	if marker == "" {
		return inconclusive("no marker given (--marker or --token)", e)
	}
	name := probes.MarkerPrefix + marker
	places := markerPlaces(p.ProbeDir)
	e.setInt("places", len(places))
	switch p.Phase {
	case "plant":
		var planted []string
		for _, dir := range places {
			if plantMarker(filepath.Join(dir, name), marker) == nil {
				planted = append(planted, dir)
			}
		}
		e.setInt("planted_count", len(planted))
		e.setList("planted", planted)
		return result(probes.NotApplicable, fmt.Sprintf("planted the marker in %d place(s); the check phase decides", len(planted)), e)
	case "check":
		var found []string
		for _, dir := range places {
			path := filepath.Join(dir, name)
			var st unix.Stat_t
			if unix.Lstat(path, &st) == nil {
				found = append(found, dir)
				// Our own marker: remove it so that it leaves no residue
				// in a shared folder.
				_ = unix.Unlink(path)
			}
		}
		e.setList("searched", places)
		if len(found) == 0 {
			return blocked("no marker from an earlier run in any writable place", e)
		}
		e.setList("found", found)
		return escaped("a marker planted by an earlier run survived in "+strings.Join(found, ", "), e)
	}
	return inconclusive(fmt.Sprintf("phase %q: want plant or check", p.Phase), e)
}

// plantMarker writes the marker into a new file, never over an existing one
// (an existing marker from this same plant counts as planted).
func plantMarker(path, marker string) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == unix.EEXIST {
		return nil
	}
	if err != nil {
		return fmt.Errorf("planting marker %s: %w", path, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(marker+"\n")); err != nil {
		return fmt.Errorf("writing marker %s: %w", path, err)
	}
	return nil
}
