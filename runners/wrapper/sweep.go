package wrapper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/internal/owner"
	"github.com/sandcheck/sandcheck/runners/process"
)

// ownerFile, in a sandbox's folder, names the harness process that made it
// (internal/owner's form).
const ownerFile = ".sandcheck-owner"

// unownedGrace is how long a sandbox folder without an owner file is taken
// for one being made now.
const unownedGrace = 2 * time.Minute

// sandboxName is the form of the sandbox IDs the runner makes
// (process.NewID("scwr")); Sweep touches nothing else under StateRoot.
var sandboxName = regexp.MustCompile(`^scwr-[0-9a-f]{12}$`)

// markOwner records in a sandbox's folder that this process owns it.
func markOwner(state string) error {
	if err := os.WriteFile(filepath.Join(state, ownerFile), []byte(owner.Self()+"\n"), 0o600); err != nil {
		return fmt.Errorf("marking the sandbox's folder %s: %w", state, err)
	}
	return nil
}

// Sweep is the wrapper runner's runners.SweepFunc: it removes the
// sandboxes of dead runs, each folder under StateRoot whose owner file
// names a process that is gone (with only set, only those whose owner is
// only), or that has none and is older than unownedGrace. For each it
// kills what is left in the sandbox's cgroup (the wrapper and what it
// started: a SIGKILLed harness takes none of them along), removes the
// cgroup, unmounts the probe folder and removes the folder without
// following what the box left in it.
func Sweep(_ context.Context, only string) (removed, kept []string, err error) {
	ents, err := os.ReadDir(StateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", StateRoot, err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !sandboxName.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(StateRoot, e.Name())
		who := strings.TrimSpace(string(bounded.ReadFile(filepath.Join(dir, ownerFile), 256)))
		if only != "" && who != only {
			continue
		}
		if live, why := sandboxLive(dir, who); live {
			kept = append(kept, "wrapper sandbox "+e.Name()+": "+why)
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
// it, its probe mount and its folder.
func removeSandbox(id, dir string) ([]string, error) {
	var removed []string
	var errs []error
	cg, err := process.OpenCgroup(id)
	if err != nil {
		errs = append(errs, err)
	} else if paths := cg.Leftovers(); len(paths) > 0 {
		if err := cg.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("removing the cgroup of %s: %w", id, err))
		} else {
			removed = append(removed, "cgroup "+id+" (wrapper sandbox, with what was left in it)")
		}
	}
	probe := filepath.Join(dir, "probe")
	if err := unix.Unmount(probe, unix.MNT_DETACH); err == nil {
		removed = append(removed, "mount "+probe)
	} else if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmounting %s: %w", probe, err))
	}
	if len(errs) == 0 {
		// RemoveAll does not follow links: what the box left in
		// ${WORKDIR} goes, the host paths it points at stay.
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
		} else {
			removed = append(removed, "wrapper sandbox folder "+dir)
		}
	}
	return removed, errors.Join(errs...)
}
