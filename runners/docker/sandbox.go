package docker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// Sandbox is one running container. Its methods are safe for concurrent use.
type Sandbox struct {
	cli   client.APIClient
	id    string
	name  string
	image string // the reference the target names
	log   *slog.Logger
	// unconfined is set when the sandbox's network is host or bridge: Exec
	// then refuses network probes.
	unconfined bool

	// mergedDir is the container's root filesystem mount on the host (from
	// the storage driver), looked for by VerifyTeardown.
	mergedDir string
	// hostDirs are the writable host folders (binds and volumes) mounted
	// into the container, where FindResidue looks for planted files.
	hostDirs []string
	// oom follows the container's memory cgroup for the kernel's OOM
	// notifications (nil where it cannot: Inspect then has only the
	// engine's word).
	oom *oomWatch
	// release ends this process's hold on the holder's lease (a no-op for
	// a task sandbox, which has no holder).
	release func()

	closeMu  sync.Mutex
	closed   bool // Close removed the container
	closeRan bool // Close was called at least once
}

// ID is the container ID.
func (s *Sandbox) ID() string { return s.id }

// Name is the container name.
func (s *Sandbox) Name() string { return s.name }

// Close kills the container (with every process in it, including execs that
// outlived a cancelled Exec) and removes it with its anonymous volumes. It
// ignores ctx's cancellation, so a run that was cancelled still cleans up,
// and is bounded on its own. Calling it again, also concurrently, is safe;
// after a failure it tries again.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.closeRan = true
	if s.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if s.release != nil {
		// Whether or not the removal works: a container the engine
		// would not remove then ends on its own within its lease.
		s.release()
	}
	if err := remove(ctx, s.cli, s.id); err != nil {
		return err
	}
	s.oom.Close()
	s.closed = true
	s.log.Debug("sandbox removed", "id", s.id)
	return nil
}

// recordLayout notes where the container's root filesystem is mounted on the
// host, for VerifyTeardown, and starts following its memory cgroup for OOM
// kills (for at most maxLife). Not knowing either only narrows a check.
func (s *Sandbox) recordLayout(ctx context.Context, maxLife time.Duration) {
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return
	}
	if st := res.Container.State; st != nil && st.Running {
		if s.oom, err = watchOOM(st.Pid, maxLife); err != nil {
			s.log.Debug("no OOM watch: the engine's OOMKilled is all there is", "err", err)
		}
	}
	s.hostDirs = writableHostDirs(res.Container.Mounts)
	if res.Container.GraphDriver == nil {
		return
	}
	s.mergedDir = res.Container.GraphDriver.Data["MergedDir"]
}

var errNotClosed = errors.New("the sandbox was not closed")
