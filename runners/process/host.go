package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/internal/lease"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/runners"
)

// HolderLease is how long the idle holder holds once the run that made the
// sandbox stops renewing its lease (internal/lease): a sandbox lives while
// its run does, however long, and a killed run's end within minutes, even
// when its reaper was killed too.
const HolderLease = lease.TTL

// Host is the host-side machinery of a sandbox whose processes run on the
// host in a cgroup of its own: its ID, cgroup, network namespace and first
// process, and whether it was killed or closed. The process and bwrap
// runners' Sandbox types embed it, so its methods (ID, Wait, CPUUsed, Kill,
// Close) are theirs.
type Host struct {
	// SandboxID names the sandbox and its cgroup.
	SandboxID string
	// Cgroup holds every process of the sandbox.
	Cgroup *Cgroup
	// Net is the sandbox's network namespace; nil when it has none of the
	// harness's.
	Net *netharness.Namespace
	// First is the sandbox's first process (the holder, or the task).
	First *Proc
	// Log is the sandbox's logger.
	Log *slog.Logger
	// NotReaped is the format (its one verb the pid) of Teardown's error
	// when the first process outlives the wait after its kill.
	NotReaped string
	// Cleanup, when set, removes what else the sandbox made; Teardown runs
	// it last.
	Cleanup func() error

	// release ends this process's hold on the holder's lease (KeepLease).
	release func()

	mu       sync.Mutex
	closed   bool
	closeRan bool
	killed   bool
}

// HolderArgv is the first process's command: command (a task), or the
// probe's idle holder when command is empty, tied to the lease of the
// sandbox's probe folder (KeepLease) and bounded by nothing else.
func HolderArgv(command []string) []string {
	if len(command) > 0 {
		return command
	}
	return append([]string{runners.ProbeMount + "/" + runners.ProbeBinary, "hold", "--max", "0"}, lease.HolderArgs(HolderLease)...)
}

// KeepLease renews the lease of probeDir, which the idle holder follows,
// until Teardown; a task sandbox (command set) has no holder and no lease.
// Call it before starting the first process.
func (h *Host) KeepLease(probeDir string, command []string) error {
	if len(command) > 0 || h.release != nil {
		return nil
	}
	release, err := lease.Keep(probeDir, HolderLease)
	if err != nil {
		return err
	}
	h.release = release
	return nil
}

// CheckHolder fails when the idle holder, just started as the first
// process, is dead on arrival (exits within 100ms).
func (h *Host) CheckHolder(ctx context.Context) error {
	select {
	case <-h.First.Done():
		res, _ := h.First.Wait(ctx)
		return fmt.Errorf("the holder exited at once with code %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	case <-time.After(100 * time.Millisecond):
	}
	return nil
}

// ID names the sandbox (and its cgroup).
func (h *Host) ID() string { return h.SandboxID }

// Running fails when the sandbox was killed or closed or its first process
// has ended.
func (h *Host) Running() error {
	h.mu.Lock()
	dead := h.closeRan || h.killed
	h.mu.Unlock()
	if dead || h.First.Exited() {
		return fmt.Errorf("the sandbox %s is not running", h.SandboxID)
	}
	return nil
}

// Wait waits for the first process (the task) and returns its exit code and
// output.
func (h *Host) Wait(ctx context.Context) (runners.ExitResult, error) {
	return h.First.Wait(ctx)
}

// CPUUsed is the sandbox cgroup's CPU time.
func (h *Host) CPUUsed() (time.Duration, error) { return h.Cgroup.CPUUsed() }

// Kill stops every process of the sandbox; Close still removes it.
func (h *Host) Kill(ctx context.Context) error {
	h.mu.Lock()
	h.killed = true
	h.mu.Unlock()
	return h.Cgroup.Kill()
}

// Close kills every process of the sandbox (its cgroup's), removes the
// cgroup, drops the network namespace and runs Cleanup. It ignores ctx;
// calling it twice is safe.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeRan = true
	if h.closed {
		return nil
	}
	if err := h.Teardown(); err != nil {
		return fmt.Errorf("closing %s: %w", h.SandboxID, err)
	}
	h.closed = true
	return nil
}

// Teardown removes what of the sandbox was made: the cgroup (killing its
// processes), the first process (killed and reaped), the network namespace,
// then whatever Cleanup removes. A failed start calls it directly.
func (h *Host) Teardown() error {
	if h.release != nil {
		h.release()
	}
	var errs []error
	if h.Cgroup != nil {
		errs = append(errs, h.Cgroup.Remove())
	}
	if h.First != nil {
		h.First.Kill()
		select {
		case <-h.First.Done():
		case <-time.After(killWait):
			errs = append(errs, fmt.Errorf(h.NotReaped, h.First.Pid()))
		}
	}
	if h.Net != nil {
		errs = append(errs, h.Net.Close())
	}
	if h.Cleanup != nil {
		errs = append(errs, h.Cleanup())
	}
	return errors.Join(errs...)
}

// CheckClosed fails unless Close ran, for VerifyTeardown.
func (h *Host) CheckClosed() error {
	h.mu.Lock()
	ran := h.closeRan
	h.mu.Unlock()
	if !ran {
		return fmt.Errorf("verifying teardown of %s: the sandbox was not closed", h.SandboxID)
	}
	return nil
}
