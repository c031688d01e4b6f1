package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/moby/client"
)

// Spawn starts argv in the container as user (empty: the container's user)
// with env added to the container's environment, and returns once the
// engine started it, without waiting for it or reading its output. The
// harness uses it for helper processes that must live beside a probe (a
// platform agent holding a token); Close kills them with the container.
func (s *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	created, err := s.cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{Cmd: argv, User: user, Env: env})
	if err != nil {
		return fmt.Errorf("creating exec of %s: %w", argv[0], err)
	}
	if _, err := s.cli.ExecStart(ctx, created.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("starting exec of %s: %w", argv[0], err)
	}
	return nil
}
