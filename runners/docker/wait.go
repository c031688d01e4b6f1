package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// Wait follows a task sandbox's output from its start until its first
// process ends, keeping up to runners.MaxOutput of stdout and of stderr (the
// rest is read and discarded, Truncated set), then returns the exit code.
// When ctx ends first it returns what it read, exit code -1 and ctx's error;
// Close kills the task.
func (s *Sandbox) Wait(ctx context.Context) (runners.ExitResult, error) {
	res := runners.ExitResult{ExitCode: -1}
	start := time.Now()
	logs, err := s.cli.ContainerLogs(ctx, s.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return res, fmt.Errorf("following the task's output: %w", err)
	}
	defer logs.Close()
	stdout, stderr := newCapped(runners.MaxOutput), newCapped(runners.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, logs)
		copied <- err
	}()
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-ctx.Done():
		logs.Close()
		<-copied
	}
	finish := func() runners.ExitResult {
		res.Stdout, res.Stderr = stdout.buf, stderr.buf
		res.Truncated = stdout.over || stderr.over
		res.Duration = time.Since(start)
		return res
	}
	if ctx.Err() != nil {
		return finish(), fmt.Errorf("waiting for the task: %w", ctx.Err())
	}
	w := s.cli.ContainerWait(ctx, s.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-w.Result:
		res.ExitCode = int(r.StatusCode)
		if r.Error != nil && r.Error.Message != "" {
			return finish(), fmt.Errorf("waiting for the task: %s", r.Error.Message)
		}
	case err := <-w.Error:
		return finish(), fmt.Errorf("waiting for the task: %w", errors.Join(err, copyErr))
	case <-ctx.Done():
		return finish(), fmt.Errorf("waiting for the task: %w", ctx.Err())
	}
	if copyErr != nil && (stdout.over || stderr.over || strings.Contains(copyErr.Error(), "Error grabbing logs")) {
		// The engine keeps at most logConfig's 1 MB of a task's output and
		// rotates it under the follower: a flood past the cap breaks the
		// stream. That is the task's doing, so the result is a truncated
		// one (the probe's fault), not a harness failure.
		s.log.Debug("task output stream broke after a flood", "err", copyErr)
		stdout.over = true
		copyErr = nil
	}
	if copyErr != nil {
		return finish(), fmt.Errorf("reading the task's output: %w", copyErr)
	}
	if !stdout.over && !stderr.over {
		// The follower can end before the engine's log driver has written
		// the task's last, unterminated line (seen under load, and under
		// runsc); the task has exited, so its log is complete now: read it
		// once more and keep the fuller copy.
		if o, e, err := s.readLogs(ctx); err == nil && len(o.buf)+len(e.buf) > len(stdout.buf)+len(stderr.buf) {
			stdout, stderr = o, e
		}
	}
	return finish(), nil
}

// readLogs reads a stopped sandbox's whole log once, capped like Wait.
func (s *Sandbox) readLogs(ctx context.Context) (*capped, *capped, error) {
	logs, err := s.cli.ContainerLogs(ctx, s.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, nil, err
	}
	defer logs.Close()
	o, e := newCapped(runners.MaxOutput), newCapped(runners.MaxOutput)
	if _, err := stdcopy.StdCopy(o, e, logs); err != nil {
		return nil, nil, err
	}
	return o, e, nil
}
