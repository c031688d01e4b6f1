package docker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/runners"
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
	// submounts are the writable host mounts under the container's binds
	// that its own mount table shows and the engine's inspect does not (a
	// read-only bind of / keeps /dev/shm, /var/lib/docker, ... writable:
	// Docker's ro is not recursive), read when the container started.
	submounts []runners.Mount
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
	s.hostDirs = writableHostDirs(res.Container.Mounts)
	if st := res.Container.State; st != nil && st.Running {
		if s.oom, err = watchOOM(st.Pid, maxLife); err != nil {
			s.log.Debug("no OOM watch: the engine's OOMKilled is all there is", "err", err)
		}
		// The kernel's table, read before anything of the box has run
		// (the init is the harness's holder, or the task at its go-ahead).
		if table, err := hostmounts.OfPID(st.Pid); err != nil {
			s.log.Debug("no mount table: the engine's mounts are all there is", "err", err)
		} else {
			var tmpfs map[string]string
			if res.Container.HostConfig != nil {
				tmpfs = res.Container.HostConfig.Tmpfs
			}
			s.submounts = hostSubmounts(res.Container.Mounts, tmpfs, table)
			for _, m := range s.submounts {
				if fi, err := os.Lstat(m.Source); err == nil && fi.IsDir() && !slices.Contains(s.hostDirs, m.Source) {
					s.hostDirs = append(s.hostDirs, m.Source)
				}
			}
		}
	}
	if res.Container.GraphDriver == nil {
		return
	}
	s.mergedDir = res.Container.GraphDriver.Data["MergedDir"]
}

var errNotClosed = errors.New("the sandbox was not closed")
