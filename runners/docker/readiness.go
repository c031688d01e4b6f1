package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// readyPoll is the pause between readiness attempts; readyExecTimeout bounds
// one `list` exec.
const (
	readyPoll        = 100 * time.Millisecond
	readyExecTimeout = 10 * time.Second
)

// waitReady returns once the container runs and the probe binary answers
// `list` in it. A container that stopped fails at once; ctx bounds the rest
// (Start's timeout), and the error then carries the last attempt that the
// deadline did not cut short.
func waitReady(ctx context.Context, cli client.APIClient, sb *Sandbox) error {
	last := errors.New("no attempt finished")
	for {
		res, err := cli.ContainerInspect(ctx, sb.id, client.ContainerInspectOptions{})
		switch {
		case ctx.Err() != nil:
			// Keep the last attempt that the deadline did not cut short.
		case err != nil:
			last = fmt.Errorf("reading container state: %w", err)
		case res.Container.State == nil:
			last = errors.New("reading container state: the engine gave none")
		case !res.Container.State.Running:
			// Start's error adds the state and the last log lines.
			return errors.New("the container stopped before it was ready")
		default:
			err := runners.ProbeAnswers(ctx, sb, readyExecTimeout)
			if err == nil {
				return nil
			}
			if ctx.Err() == nil {
				last = err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the probe did not answer before the start timeout: %w (last attempt: %w)", ctx.Err(), last)
		case <-time.After(readyPoll):
		}
	}
}
