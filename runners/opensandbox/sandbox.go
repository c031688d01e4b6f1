package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// Sandbox is one OpenSandbox sandbox. Its methods are safe for concurrent
// use.
type Sandbox struct {
	id    string
	name  string
	api   *client
	execd *execd
	log   interface {
		Debug(string, ...any)
		Warn(string, ...any)
	}
	// Endpoint is execd's endpoint as the lifecycle server named it.
	Endpoint string
	// endpoint is Endpoint parsed.
	endpoint execdEndpoint

	closeMu sync.Mutex
	closed  bool
}

// ID is the sandbox id the lifecycle server gave.
func (s *Sandbox) ID() string { return s.id }

// Exec runs argv through execd's POST /command (as one shell command line)
// and reads its event stream; see execd.run.
func (s *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	res, err := s.execd.run(ctx, runners.ShellQuote(argv))
	if err != nil {
		if ctx.Err() == nil {
			// Say whether the platform reports the sandbox dead: a broken
			// stream then means the sandbox went, not the connection.
			if state, oom := s.state(ctx); state != "" {
				err = fmt.Errorf("%w (stream: %v)", &runners.KilledError{Account: state, OOM: oom}, err)
			}
		}
		return res, fmt.Errorf("running %s in sandbox %s: %w", argv[0], s.id, err)
	}
	return res, nil
}

// Spawn starts argv in the background through execd as user (a numeric
// uid) with env added ("K=V" words), without waiting for it: a platform
// agent beside the task.
func (s *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	uid, err := strconv.Atoi(user)
	if err != nil {
		return fmt.Errorf("spawning %s in sandbox %s: user %q is not a numeric uid", argv[0], s.id, user)
	}
	envs := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envs[k] = v
	}
	if err := s.execd.spawn(ctx, runners.ShellQuote(argv), uid, envs); err != nil {
		return fmt.Errorf("spawning %s in sandbox %s: %w", argv[0], s.id, err)
	}
	return nil
}

// deathWait bounds how long a broken stream waits for the platform to
// report the sandbox dead (a dying container is still running for a moment).
const deathWait = 5 * time.Second

// state is the sandbox's state with reason and message once it is no
// longer Running, and whether the platform names its memory limit (reason
// OOMKilled); "" when it stays Running for deathWait or cannot be read.
func (s *Sandbox) state(ctx context.Context) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, deathWait)
	defer cancel()
	for {
		info, err := s.api.get(ctx, s.id)
		switch {
		case errors.Is(err, errNotFound):
			return "gone", false
		case err != nil:
			return "", false
		case info.Status.State != "Running":
			return strings.TrimSpace(info.Status.State + ": " + info.Status.Reason + " " + info.Status.Message), info.Status.Reason == "OOMKilled"
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// CopyIn uploads one host file through execd's POST /files/upload, keeping
// its permission bits.
func (s *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	if !path.IsAbs(sandboxPath) || path.Clean(sandboxPath) != sandboxPath || sandboxPath == "/" {
		return fmt.Errorf("copying %s in: %q is not a clean absolute file path", hostPath, sandboxPath)
	}
	return s.execd.upload(ctx, hostPath, sandboxPath, 0o644)
}

// Close deletes the sandbox (DELETE, 204; a 404 means it is already gone)
// and waits until the server no longer lists it as alive. It ignores ctx's
// cancellation so a cancelled run still cleans up, and is bounded on its
// own; calling it again is safe.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := s.api.delete(ctx, s.id); err != nil && !errors.Is(err, errNotFound) {
		return fmt.Errorf("deleting sandbox %s: %w", s.id, err)
	}
	for {
		info, err := s.api.get(ctx, s.id)
		if errors.Is(err, errNotFound) || (err == nil && info.Status.State == "Terminated") {
			break
		}
		if err == nil && info.Status.State == "Failed" {
			return fmt.Errorf("deleting sandbox %s: the server reports it Failed: %s", s.id, info.Status.Message)
		}
		if err != nil {
			// The delete was accepted (204) but the server cannot be asked
			// how it went: the delete stands, the wait is given up.
			s.log.Warn("sandbox deleted, its state unreadable", "id", s.id, "err", err)
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deleting sandbox %s: still there after %s (last: %v)", s.id, closeTimeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	s.closed = true
	s.log.Debug("sandbox deleted", "id", s.id)
	return nil
}
