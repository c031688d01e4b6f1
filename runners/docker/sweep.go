package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/owner"
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
	// Only a runner made WithMaxLifetime sets it: by default a sandbox
	// lives while its run does (its holder's lease, DefaultLease).
	LabelDeadline = "sandcheck.deadline"
)

// ownerLabels are the sweep labels of a sandbox starting now with holder
// lifetime maxLife (0: no bound but the lease's).
func ownerLabels(maxLife time.Duration) map[string]string {
	l := map[string]string{LabelOwner: selfOwner()}
	if maxLife > 0 {
		l[LabelDeadline] = time.Now().Add(maxLife).UTC().Format(time.RFC3339)
	}
	return l
}

// selfOwner is this process's owner string.
func selfOwner() string { return owner.Self() }

// SelfOwner is this process's owner string, as LabelOwner and a run
// folder's owner file name it: what a reaper watching this process sweeps.
func SelfOwner() string { return owner.Self() }

func bootID() string { return owner.BootID() }

// ownerAlive reports whether an owner string names a live process on this
// boot (owner.Alive).
func ownerAlive(o string) (alive, known bool) { return owner.Alive(o) }

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
	// before owners were recorded) must be to be swept; default 2 h, past
	// which such a build's holder has exited anyway.
	Unowned time.Duration
	// Owner, if set, confines the sweep to the things of one harness
	// process (an owner string, SelfOwner): its sandboxes (LabelOwner), the
	// teardown objects of their runs, and its run folders (owner file);
	// nothing of any other run is looked at. The harness network sweep is
	// the same either way: a harness network exists only while its run
	// holds the harness lock, so once the sweep holds it, every harness
	// network left is a dead run's, and the one dead run whose network can
	// be there is the run that held the lock last. A reaper sweeps its own
	// run's things this way once that run's process has died.
	Owner string
	// Runs, if not nil, carries what a sweep learnt to the next: each
	// sweep records the runs (sandcheck.run) whose sandboxes it saw, true
	// while one of them is live, and sweeps the teardown objects of the
	// runs already in it found dead, even when none of their sandboxes is
	// left. A reaper sweeping again passes the same map, for objects that
	// appear after the first sweep (an engine request still in flight when
	// the run died).
	Runs map[string]bool
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
		opts.Unowned = unownedAge
	}
	c, err := engine(ctx)
	if err != nil {
		// The run folders are the host's, not the engine's: a run of
		// another runner leaves its honey credentials there too.
		r, k, derr := sweepRunDirs(opts.RunDirs, opts.Owner)
		return r, k, errors.Join(err, derr)
	}
	var errs []error
	runs, r, k, err := sweepSandboxes(ctx, c, opts)
	removed, kept = append(removed, r...), append(kept, k...)
	errs = append(errs, err)
	if opts.Runs != nil {
		for run, live := range runs {
			opts.Runs[run] = live
		}
		runs = opts.Runs
	}
	r, err = sweepTeardownObjects(ctx, c, runs, opts.Owner != "")
	removed, errs = append(removed, r...), append(errs, err)
	r, k, err = sweepRunDirs(opts.RunDirs, opts.Owner)
	removed, kept = append(removed, r...), append(kept, k...)
	errs = append(errs, err)
	lctx, cancel := context.WithTimeout(ctx, opts.LockWait)
	defer cancel()
	r, err = netharness.SweepNotify(lctx, c, opts.OnLockWait)
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
		if opts.Owner != "" && ctr.Labels[LabelOwner] != opts.Owner {
			continue // another run's: not this sweep's to judge
		}
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
// run it did not see once they are older than a probe's lifetime (unless
// onlySeen: a sweep confined to one owner's runs); never for a run with live
// sandboxes.
func sweepTeardownObjects(ctx context.Context, c client.APIClient, runs map[string]bool, onlySeen bool) ([]string, error) {
	const minAge = 10 * time.Minute
	keep := func(run string, created time.Time) bool {
		live, seen := runs[run]
		return live || (!seen && (onlySeen || time.Since(created) < minAge))
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
