package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// exitPollTimeout bounds waiting for the engine to mark a finished exec as
// stopped; exitPoll is the pause between looks.
const (
	exitPollTimeout = 10 * time.Second
	exitPoll        = 20 * time.Millisecond
)

// Exec runs argv in the container as its configured user and waits for it.
// Stdout and stderr are kept up to runners.MaxOutput each; the rest is read
// and discarded (Truncated is set), so a flood neither blocks the process nor
// grows memory. A command the runtime cannot start is not an error: the
// engine reports exit code 126 or 127 and its message. An output stream that
// breaks is an error, returned with the exit code. When ctx ends first,
// Exec returns what it read, exit code -1 and ctx's error; the process may
// keep running in the container until Close kills the container.
func (s *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	res := runners.ExitResult{ExitCode: -1}
	if len(argv) == 0 {
		return res, errors.New("exec: empty command")
	}
	if s.unconfined {
		if err := checkNetworkArgv(argv); err != nil {
			return res, err
		}
	}
	start := time.Now()
	created, err := s.cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		AttachStdout: true, AttachStderr: true, Cmd: argv,
	})
	if err != nil {
		return res, fmt.Errorf("creating exec of %s: %w", argv[0], err)
	}
	att, err := s.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return res, fmt.Errorf("starting exec of %s: %w", argv[0], err)
	}
	defer att.Close()

	stdout, stderr := newCapped(runners.MaxOutput), newCapped(runners.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-ctx.Done():
		att.Close() // unblocks the copy
		<-copied
	}
	finish := func() runners.ExitResult {
		res.Stdout, res.Stderr = stdout.buf, stderr.buf
		res.Truncated = stdout.over || stderr.over
		res.Duration = time.Since(start)
		return res
	}
	if ctx.Err() != nil {
		return finish(), fmt.Errorf("running %s: %w", argv[0], ctx.Err())
	}
	code, err := s.exitCode(ctx, created.ID)
	if err != nil {
		return finish(), fmt.Errorf("running %s: %w", argv[0], errors.Join(err, copyErr))
	}
	res.ExitCode = code
	if copyErr != nil {
		// The stream broke or the engine put an error in it: the output may
		// be incomplete, so the result is not one to judge by.
		return finish(), fmt.Errorf("reading the output of %s: %w", argv[0], copyErr)
	}
	return finish(), nil
}

// exitCode waits for the engine to mark the exec stopped: it closes the
// stream first and records the exit a moment later.
func (s *Sandbox) exitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, exitPollTimeout)
	defer cancel()
	for {
		in, err := s.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("inspecting exec: %w", err)
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the exit code: %w", ctx.Err())
		case <-time.After(exitPoll):
		}
	}
}

// capped keeps the first limit bytes written to it and counts the rest as
// discarded. Writes never fail, so the producer is drained.
type capped struct {
	buf   []byte
	limit int
	over  bool
}

func newCapped(limit int) *capped { return &capped{limit: limit} }

// Write implements io.Writer.
func (c *capped) Write(p []byte) (int, error) {
	keep := p
	if room := c.limit - len(c.buf); len(p) > room {
		c.over = true
		keep = p[:max(room, 0)]
	}
	c.buf = append(c.buf, keep...)
	return len(p), nil
}
