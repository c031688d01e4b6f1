package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
)

// readyPoll is the pause between readiness attempts; readyExecTimeout bounds
// one `list` exec.
const (
	readyPoll        = 100 * time.Millisecond
	readyExecTimeout = 10 * time.Second
)

// readiness is the wait strategy: the container runs and the probe binary
// answers `list`. A container that stopped fails at once.
type readiness struct{ sb *Sandbox }

var _ wait.Strategy = readiness{}

// String names the strategy in testcontainers-go's log.
func (w readiness) String() string { return probePath + " list" }

// WaitUntilReady implements wait.Strategy; the context bounds it (Start's
// timeout).
func (w readiness) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	last := errors.New("no attempt finished")
	for {
		st, err := target.State(ctx)
		switch {
		case ctx.Err() != nil:
			// Keep the last attempt that the deadline did not cut short.
		case err != nil:
			last = fmt.Errorf("reading container state: %w", err)
		case !st.Running:
			// Start's error adds the state and the last log lines.
			return errors.New("the container stopped before it was ready")
		default:
			ectx, cancel := context.WithTimeout(ctx, readyExecTimeout)
			res, err := w.sb.Exec(ectx, []string{probePath, "list"})
			cancel()
			switch {
			case err == nil && res.ExitCode == 0:
				return nil
			case err == nil:
				last = fmt.Errorf("running %s list: exit code %d, stderr %q", probePath, res.ExitCode, lastLines(res.Stderr, 5))
			case ctx.Err() == nil:
				last = fmt.Errorf("running %s list: %w", probePath, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the probe did not answer before the start timeout: %w (last attempt: %w)", ctx.Err(), last)
		case <-time.After(readyPoll):
		}
	}
}
