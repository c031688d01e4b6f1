package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sandcheck/sandcheck/runners"
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
			err := runners.ProbeAnswers(ctx, w.sb, readyExecTimeout)
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
