package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/internal/owner"
)

// OwnerFile, in a host-process sandbox's state folder, names the harness
// process that made it (internal/owner's form).
const OwnerFile = ".sandcheck-owner"

// unownedGrace is how long a state folder without an owner file is taken
// for one being made now.
const unownedGrace = 2 * time.Minute

// MarkOwner records in a sandbox's state folder that this process owns it.
func MarkOwner(state string) error {
	if err := os.WriteFile(filepath.Join(state, OwnerFile), []byte(owner.Self()+"\n"), 0o600); err != nil {
		return fmt.Errorf("marking the sandbox's folder %s: %w", state, err)
	}
	return nil
}

// SweepSandboxes removes the host-process sandboxes of dead runs that a
// runner keeps under root, one state folder per sandbox named prefix-<12
// hex digits> (NewID) and its cgroup of the same name: each whose owner
// file names a process that is gone (with only set, only those whose owner
// is only), or that has none and is older than unownedGrace. For each it
// kills what is left in the cgroup (a SIGKILLed harness takes none of it
// along) and removes the cgroup, unmounts what is mounted under the folder
// (the last mounted first) and removes the folder without following what
// the box left in it; a folder something is still mounted under stays.
func SweepSandboxes(root, prefix, only string) (removed, kept []string, err error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", root, err)
	}
	name := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-[0-9a-f]{12}$`)
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !name.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		who := strings.TrimSpace(string(bounded.ReadFile(filepath.Join(dir, OwnerFile), 256)))
		if only != "" && who != only {
			continue
		}
		if live, why := sandboxLive(dir, who); live {
			kept = append(kept, "sandbox "+dir+": "+why)
			continue
		}
		r, err := removeSandbox(e.Name(), dir)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, kept, errors.Join(errs...)
}

// sandboxLive says whether the sandbox in dir, owned by who, may belong to
// a live run, and why.
func sandboxLive(dir, who string) (bool, string) {
	if who == "" {
		fi, err := os.Lstat(dir)
		if err == nil && time.Since(fi.ModTime()) < unownedGrace {
			return true, "no owner yet, made " + time.Since(fi.ModTime()).Round(time.Second).String() + " ago"
		}
		return false, ""
	}
	if alive, known := owner.Alive(who); alive || !known {
		return true, "its run " + who + " is alive (or cannot be told)"
	}
	return false, ""
}

// removeSandbox removes one dead sandbox: its cgroup with what is left in
// it, the mounts under its folder and the folder.
func removeSandbox(id, dir string) ([]string, error) {
	var removed []string
	var errs []error
	cg, err := OpenRecordedCgroup(id, dir)
	if err != nil {
		errs = append(errs, err)
	} else if len(cg.Leftovers()) > 0 {
		if err := cg.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("removing the cgroup of %s: %w", id, err))
		} else {
			removed = append(removed, "cgroup "+id+" (with what was left in it)")
		}
	}
	mounts, err := hostmounts.Under(dir)
	if err != nil {
		return removed, errors.Join(append(errs, err)...)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			continue
		}
		removed = append(removed, "mount "+m)
	}
	if left, err := hostmounts.Under(dir); err != nil || len(left) > 0 {
		// Never remove through a mount.
		return removed, errors.Join(append(errs, err, fmt.Errorf("mounts remain under %s: %v; leaving it", dir, left))...)
	}
	// RemoveAll does not follow links: what the box left in the folder
	// goes, the host paths it points at stay.
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	} else {
		removed = append(removed, "sandbox folder "+dir)
	}
	return removed, errors.Join(errs...)
}
