package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
)

// Labels the runner puts on every sandbox beside LabelSandbox, so a later
// sweep tells a live run's sandboxes from a dead one's without touching
// anything else on the host.
const (
	// LabelOwner names the harness process that started the sandbox:
	// "<boot id>/<pid>/<start time in clock ticks>" (the start time guards
	// against a reused pid).
	LabelOwner = "sandcheck.owner"
	// LabelDeadline is when the sandbox stops itself (RFC 3339): its holder
	// exits then, and a sweep removes it from then on whatever its owner.
	LabelDeadline = "sandcheck.deadline"
)

// ownerLabels are the sweep labels of a sandbox starting now with holder
// lifetime maxLife.
func ownerLabels(maxLife time.Duration) map[string]string {
	return map[string]string{
		LabelOwner:    selfOwner(),
		LabelDeadline: time.Now().Add(maxLife).UTC().Format(time.RFC3339),
	}
}

// selfOwner is this process's owner string.
func selfOwner() string {
	pid := os.Getpid()
	return fmt.Sprintf("%s/%d/%s", bootID(), pid, startTicks(pid))
}

func bootID() string {
	return strings.TrimSpace(string(readBounded("/proc/sys/kernel/random/boot_id", 64)))
}

// startTicks is field 22 of /proc/PID/stat, the process's start time since
// boot, or "" when the process is gone.
func startTicks(pid int) string {
	b := readBounded(fmt.Sprintf("/proc/%d/stat", pid), 4096)
	// The command name (field 2) may hold spaces and parentheses: count from
	// the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerAlive reports whether an owner string names a live process on this
// boot. known is false when the owner cannot be judged from here (another
// machine's engine, or another boot: then it is certainly dead).
func ownerAlive(owner string) (alive, known bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false, false
	}
	if parts[0] != bootID() {
		return false, true // a previous boot's process is gone
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false, false
	}
	return startTicks(pid) == parts[2], true
}

// SweepOptions tunes Sweep.
type SweepOptions struct {
	// RunDirs is the glob of run folders (default: sandcheck-run-* in the
	// temporary folder, where the engine makes them).
	RunDirs string
	// LockWait bounds waiting for the harness lock before the network sweep
	// (a live harness run holds it for its life); default 5 s.
	LockWait time.Duration
	// OnLockWait, if set, is told at once when a live run holds the
	// harness lock and the network sweep waits for it, with what holds it.
	OnLockWait func(holder string)
	// Unowned is how old a sandbox without an owner label (from a build
	// before owners were recorded) must be to be swept; default
	// DefaultMaxLifetime, past which its holder has exited anyway.
	Unowned time.Duration
}

// Sweep removes what runs that died left behind, found by the harness's own
// labels and names only: sandboxes (LabelSandbox) whose owner process is gone
// or whose deadline passed, with the runtime processes of each; objects a
// teardown probe made through the engine for such runs; run folders (with
// their honey credentials, loop devices and mounts) no live process holds;
// and, through netharness.Sweep, harness networks, bridges and firewall
// rules no live run holds. Live runs' things are left alone. It returns what
// it removed and what it kept, and carries on past failures.
func Sweep(ctx context.Context, opts SweepOptions) (removed, kept []string, err error) {
	if opts.LockWait <= 0 {
		opts.LockWait = 5 * time.Second
	}
	if opts.Unowned <= 0 {
		opts.Unowned = DefaultMaxLifetime
	}
	c, err := engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	runs, r, k, err := sweepSandboxes(ctx, c, opts)
	removed, kept = append(removed, r...), append(kept, k...)
	errs = append(errs, err)
	r, err = sweepTeardownObjects(ctx, c, runs)
	removed, errs = append(removed, r...), append(errs, err)
	r, k, err = sweepRunDirs(opts.RunDirs)
	removed, kept = append(removed, r...), append(kept, k...)
	errs = append(errs, err)
	lctx, cancel := context.WithTimeout(ctx, opts.LockWait)
	defer cancel()
	r, err = netharness.SweepNotify(lctx, c.Client, opts.OnLockWait)
	removed = append(removed, r...)
	switch {
	case err != nil && lctx.Err() != nil && ctx.Err() == nil:
		kept = append(kept, "harness networks: a live run holds the harness lock ("+err.Error()+")")
	case err != nil:
		errs = append(errs, fmt.Errorf("sweeping harness networks: %w", err))
	}
	return removed, kept, errors.Join(errs...)
}

// sweepSandboxes removes dead runs' sandboxes and returns the runs it saw
// (by sandcheck.run label): true for a run that still has live sandboxes,
// false for one whose sandboxes were all dead.
func sweepSandboxes(ctx context.Context, c client.APIClient, opts SweepOptions) (map[string]bool, []string, []string, error) {
	res, err := c.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelSandbox+"=1"),
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	live := map[string]bool{}
	var removed, kept []string
	var errs []error
	for _, ctr := range res.Items {
		why := deadReason(ctr.Labels, time.Unix(ctr.Created, 0), opts.Unowned)
		what := fmt.Sprintf("sandbox %s (%s, run %s)", shortID(ctr.ID), strings.Join(ctr.Names, ","), ctr.Labels[probes.LabelRun])
		run := ctr.Labels[probes.LabelRun]
		if why == "" {
			live[run] = true
			kept = append(kept, what+": its run is live")
			continue
		}
		if _, seen := live[run]; !seen {
			live[run] = false
		}
		if err := remove(ctx, c, ctr.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, what+": "+why)
		reaped, left := reapRuntime(ctx, ctr.ID)
		for _, p := range reaped {
			removed = append(removed, "runtime process "+p+" of "+shortID(ctr.ID))
		}
		for _, p := range left {
			errs = append(errs, fmt.Errorf("sandbox %s: %s survived", shortID(ctr.ID), p))
		}
	}
	return live, removed, kept, errors.Join(errs...)
}

// deadReason says why a sandbox belongs to a dead run, or "" when its run
// may be live.
func deadReason(labels map[string]string, created time.Time, unowned time.Duration) string {
	if d, err := time.Parse(time.RFC3339, labels[LabelDeadline]); err == nil && time.Now().After(d) {
		return "past its deadline " + labels[LabelDeadline]
	}
	owner, ok := labels[LabelOwner]
	if !ok {
		if time.Since(created) > unowned {
			return fmt.Sprintf("no owner recorded and older than %s", unowned)
		}
		return ""
	}
	alive, known := ownerAlive(owner)
	switch {
	case known && !alive:
		return "its harness process " + owner + " is gone"
	case !known && time.Since(created) > unowned:
		return fmt.Sprintf("owner %s cannot be checked here and it is older than %s", owner, unowned)
	}
	return ""
}

// sweepTeardownObjects removes containers, volumes and networks a teardown
// probe made through the engine (probes.LabelTeardownToken): at once for a
// run whose sandboxes this sweep found dead (runs[run] is false), and for a
// run it did not see once they are older than a probe's lifetime; never for
// a run with live sandboxes.
func sweepTeardownObjects(ctx context.Context, c client.APIClient, runs map[string]bool) ([]string, error) {
	const minAge = 10 * time.Minute
	keep := func(run string, created time.Time) bool {
		live, seen := runs[run]
		return live || (!seen && time.Since(created) < minAge)
	}
	f := make(client.Filters).Add("label", probes.LabelTeardownToken)
	var removed []string
	var errs []error
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing teardown probe containers: %w", err)
	}
	for _, ctr := range ctrs.Items {
		if keep(ctr.Labels[probes.LabelRun], time.Unix(ctr.Created, 0)) {
			continue
		}
		if err := remove(ctx, c, ctr.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "teardown probe container "+shortID(ctr.ID))
	}
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing teardown probe volumes: %w", err))
	}
	for _, v := range vols.Items {
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		if keep(v.Labels[probes.LabelRun], created) {
			continue
		}
		if _, err := c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("removing teardown probe volume %s: %w", v.Name, err))
			continue
		}
		removed = append(removed, "teardown probe volume "+v.Name)
	}
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing teardown probe networks: %w", err))
	}
	for _, n := range nets.Items {
		if keep(n.Labels[probes.LabelRun], n.Created) {
			continue
		}
		if _, err := c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("removing teardown probe network %s: %w", n.Name, err))
			continue
		}
		removed = append(removed, "teardown probe network "+n.Name)
	}
	return removed, errors.Join(errs...)
}
