package docker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/internal/hostmounts"
)

// RunDirPattern is the name the engine gives run folders (os.MkdirTemp).
const RunDirPattern = "sandcheck-run-*"

// ownerFile, in a run folder, names its owner as LabelOwner does.
const ownerFile = ".sandcheck-owner"

// MarkRunDir records in a run folder that this process owns it, so a sweep
// knows at once when the process is gone.
func MarkRunDir(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(selfOwner()+"\n"), 0o600); err != nil {
		return fmt.Errorf("marking run folder %s: %w", dir, err)
	}
	return nil
}

// sweepRunDirs removes the run folders of dead runs: a folder is live while
// its owner file names a live process, or, without one, while a process
// holds something in it (an open file, its working folder, or a bound unix
// socket such as the engine's agent socket). Before removing one it unmounts
// what is mounted under it and detaches loop devices backed by its files.
// With only set, it looks at nothing but the folders whose owner file names
// that owner.
func sweepRunDirs(glob, only string) (removed, kept []string, err error) {
	if glob == "" {
		glob = filepath.Join(os.TempDir(), RunDirPattern)
	}
	dirs, err := filepath.Glob(glob)
	if err != nil {
		return nil, nil, fmt.Errorf("listing run folders %s: %w", glob, err)
	}
	if len(dirs) == 0 {
		return nil, nil, nil
	}
	var held []string
	if only == "" {
		held = heldPaths() // costly (every process's descriptors): only for folders without an owner
	}
	var errs []error
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if only != "" && dirOwner(dir) != only {
			continue // another run's, or not yet marked: not this sweep's
		}
		if live, why := runDirLive(dir, held, fi.ModTime()); live {
			kept = append(kept, "run folder "+dir+": "+why)
			continue
		}
		mounts, merr := hostmounts.Under(dir)
		if merr != nil {
			errs = append(errs, merr)
			kept = append(kept, "run folder "+dir+": its mounts cannot be listed")
			continue
		}
		for _, m := range mounts {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
				continue
			}
			removed = append(removed, "mount "+m)
		}
		for _, l := range loopsUnder(dir) {
			if err := detachLoop(l); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, "loop device "+l)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing run folder %s: %w", dir, err))
			continue
		}
		removed = append(removed, "run folder "+dir)
	}
	return removed, kept, errors.Join(errs...)
}

// runDirLive says whether a run folder's run may be live, and why.
func runDirLive(dir string, held []string, modified time.Time) (bool, string) {
	if owner := dirOwner(dir); owner != "" {
		if alive, known := ownerAlive(owner); alive || !known {
			return true, "its owner " + owner + " is live"
		}
		return false, ""
	}
	for _, p := range held {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true, "a process holds " + p
		}
	}
	// A run that is starting has made its folder but may not hold anything
	// in it yet.
	if age := time.Since(modified); age < youngRunDir {
		return true, fmt.Sprintf("changed %s ago, too recently to judge", age.Round(time.Second))
	}
	return false, ""
}

// dirOwner is the owner a run folder's owner file names, "" without one.
func dirOwner(dir string) string {
	return strings.TrimSpace(string(bounded.ReadFile(filepath.Join(dir, ownerFile), 256)))
}

// youngRunDir is how recently changed a run folder without an owner file
// must be for a sweep to leave it alone.
const youngRunDir = 15 * time.Second

// heldPaths lists paths live processes hold: bound unix sockets, open files
// and working folders.
func heldPaths() []string {
	var out []string
	if b, err := os.ReadFile("/proc/net/unix"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 8 && strings.HasPrefix(f[7], "/") {
				out = append(out, f[7])
			}
		}
	}
	_ = eachProcess(func(_ int, dir string) {
		if l, err := os.Readlink(filepath.Join(dir, "cwd")); err == nil {
			out = append(out, l)
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && strings.HasPrefix(l, "/") {
				out = append(out, l)
			}
		}
	})
	return out
}

// loopsUnder lists loop devices whose backing file is inside dir.
func loopsUnder(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		back := strings.TrimSpace(string(bounded.ReadFile(f, 4096)))
		back = strings.TrimSuffix(back, " (deleted)")
		if strings.HasPrefix(back, dir+"/") {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// detachLoop clears a loop device's backing file.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	return nil
}
