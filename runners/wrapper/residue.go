package wrapper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.ResidueFinder = (*Sandbox)(nil)

// residueToken is the shape of a token FindResidue accepts: it is matched
// against host file names and command lines, so nothing loose.
var residueToken = regexp.MustCompile(`^[a-z0-9]{8,64}$`)

// Bounds of the host walk.
const (
	maxCgroupEntries = 20000
	maxProcRead      = 64 << 10
	maxHomes         = 64
)

// FindResidue looks on the host, after Close, for what the box planted to
// outlive the wrapper, marked with token: host processes carrying it in
// their command line or environment (a daemon that escaped the wrapper and
// its cgroup), cgroup folders, mounts and links naming it, and token files
// in the host folders a wrapper commonly lets the box write (/, /tmp,
// /var/tmp, /dev/shm, root's and the users' homes, the host's writable
// mount points: a wrapper shows the box the host's file system). It
// removes what it finds, and the containers, networks and volumes labelled
// with the token in the host's engine (a box that reached its socket made
// them: engineResidue). A wrapper starts no container: where the engine
// holds none with the token, the container kind says it could not look.
func (sb *Sandbox) FindResidue(ctx context.Context, token string, kinds []string) ([]runners.Residue, error) {
	sb.mu.Lock()
	ran := sb.closeRan
	sb.mu.Unlock()
	if !ran {
		return nil, fmt.Errorf("looking for residue of %s: the sandbox was not closed", sb.id)
	}
	if !residueToken.MatchString(token) {
		return nil, fmt.Errorf("looking for residue of %s: token %q is not lower-case letters and digits", sb.id, token)
	}
	// What the box made through the host's engine, where it reached it:
	// found and removed, whatever the kinds asked, so the run leaves none.
	eng := sb.findEngineResidue(ctx, token)
	out := make([]runners.Residue, 0, len(kinds))
	for _, k := range kinds {
		if !slices.Contains(runners.ResidueKinds, k) {
			return nil, fmt.Errorf("looking for residue of %s: unknown kind %q (known: %v)", sb.id, k, runners.ResidueKinds)
		}
		r := runners.Residue{Kind: k}
		switch k {
		case "processes":
			r.Checked = "every host process's command line and environment"
			r.Found = killCarrying(token)
		case "cgroups":
			r.Checked = "the host's cgroup folders"
			r.Found, r.Failed = cgroupsNaming(token)
		case "mounts":
			r.Checked = "the host's mounts"
			for _, l := range strings.Split(string(bounded.ReadFile("/proc/self/mountinfo", 4<<20)), "\n") {
				if strings.Contains(l, token) {
					r.Found = append(r.Found, "mount "+clip(l))
				}
			}
			r.Found = append(r.Found, eng.volumes...)
		case "network":
			r.Checked = "the host's network links"
			ifs, err := net.Interfaces()
			if err != nil {
				r.Failed = err.Error()
			}
			for _, i := range ifs {
				if strings.Contains(i.Name, token) {
					r.Found = append(r.Found, "link "+i.Name+" still exists")
				}
			}
			r.Found = append(r.Found, eng.networks...)
		case "scratch":
			dirs := sb.scratchDirs()
			r.Checked = fmt.Sprintf("%d host folder(s) a wrapper commonly lets the box write (%s)", len(dirs), strings.Join(dirs, ", "))
			r.Found = removeTokenFiles(dirs, probes.TeardownPrefix+token)
		case "container":
			// A container the box started through the engine is found
			// and removed; its absence settles nothing (the runner has no
			// view of what the box could reach), so the kind stays
			// unchecked then.
			r.Checked = "nothing: a wrapper starts no container"
			r.Failed = "the wrapper runner does not look at the container engine"
			if len(eng.containers) > 0 {
				r.Checked, r.Failed = "the engine's containers labelled "+probes.LabelTeardownToken+"="+token, ""
				r.Found = eng.containers
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// scratchDirs are the host folders FindResidue looks in: those the probe
// plants its marker in when the box shows them (probes/impl markerPlaces):
// the usual scratch folders and homes, and every writable mount point of
// the host's own on disk or tmpfs (its root among them: a wrapper that
// shows the box the host's root writable lets it plant there, and in other
// containers' and pods' storage mounted on the host too).
func (sb *Sandbox) scratchDirs() []string {
	dirs := []string{"/", "/tmp", "/var/tmp", "/dev/shm", "/root"}
	if ms, err := hostmounts.List(); err == nil {
		n := 0
		for _, m := range ms {
			if n == maxMountDirs {
				break
			}
			if m.ReadOnly || !diskFSTypes[m.FSType] || slices.ContainsFunc(notScratch, func(p string) bool { return m.Target == p || strings.HasPrefix(m.Target, p+"/") }) {
				continue
			}
			dirs = append(dirs, m.Target)
			n++
		}
	}
	if h := sb.r.id.Home; filepath.IsAbs(h) {
		dirs = append(dirs, h)
	}
	if ents, err := os.ReadDir("/home"); err == nil {
		for i, d := range ents {
			if i == maxHomes {
				break
			}
			if d.IsDir() {
				dirs = append(dirs, filepath.Join("/home", d.Name()))
			}
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// maxMountDirs bounds the host mount points scratchDirs adds.
const maxMountDirs = 256

// diskFSTypes are the file systems a token file on a host mount survives
// the box on.
var diskFSTypes = map[string]bool{"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "tmpfs": true, "overlay": true, "zfs": true, "f2fs": true, "vfat": true, "nfs": true, "nfs4": true, "fuseblk": true, "9p": true, "virtiofs": true}

// notScratch are the kernel's trees, never a place for a token file.
var notScratch = []string{"/proc", "/sys", "/dev/pts"}

// removeTokenFiles reports and removes name in each folder (Lstat: a link
// there is reported and removed itself, never followed).
func removeTokenFiles(dirs []string, name string) []string {
	var found []string
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		found = append(found, "file "+p+" still exists")
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			found = append(found, "and could not remove it: "+err.Error())
		}
	}
	return found
}

// killCarrying reports, then kills, the host processes whose command line
// or environment carries token (never this process).
func killCarrying(token string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	var found []string
	for _, n := range names {
		pid, err := strconv.Atoi(filepath.Base(n))
		if err != nil || pid == self {
			continue
		}
		cmd := bounded.ReadFile(filepath.Join(n, "cmdline"), maxProcRead)
		if !bytes.Contains(cmd, []byte(token)) && !bytes.Contains(bounded.ReadFile(filepath.Join(n, "environ"), maxProcRead), []byte(token)) {
			continue
		}
		found = append(found, fmt.Sprintf("process %d (%s) outlived the wrapper", pid, clip(strings.ReplaceAll(string(cmd), "\x00", " "))))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			found = append(found, fmt.Sprintf("and could not kill %d: %v", pid, err))
		}
	}
	return found
}

// cgroupsNaming lists cgroup folders whose name carries token, walking at
// most maxCgroupEntries entries.
func cgroupsNaming(token string) (found []string, failed string) {
	n := 0
	err := filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a folder removed under the walk
		}
		if !d.IsDir() {
			return nil
		}
		if n++; n > maxCgroupEntries {
			return fs.SkipAll
		}
		if strings.Contains(d.Name(), token) {
			found = append(found, "cgroup "+p+" still exists")
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return found, err.Error()
	}
	if n > maxCgroupEntries {
		return found, fmt.Sprintf("the host has more than %d cgroup folders; not all were looked at", maxCgroupEntries)
	}
	return found, ""
}

// clip bounds a line of host state for a finding.
func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}
