package process

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/netharness"
)

// Base is the runner-side state the process and bwrap runners share: the
// logger, the engine client (made on first use) and the harness network
// the engine handed over. Their Runner types embed it, so NetworkAPI and
// JoinHarness are theirs. It is safe for concurrent use once configured.
type Base struct {
	log        *slog.Logger
	docker     client.NetworkAPIClient
	joined     Joined
	dockerOnce sync.Once
	dockerErr  error
}

// Option configures a Runner.
type Option func(*Base)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(b *Base) {
		if l != nil {
			b.log = l
		}
	}
}

// WithDocker sets the engine client through which the harness network is
// looked up (network harness); the default makes one from the environment.
func WithDocker(c client.NetworkAPIClient) Option { return func(b *Base) { b.docker = c } }

// Configure sets the discarding logger, then applies opts.
func (b *Base) Configure(opts []Option) {
	b.log = slog.New(slog.DiscardHandler)
	for _, o := range opts {
		o(b)
	}
}

// Logger is the runner's logger.
func (b *Base) Logger() *slog.Logger { return b.log }

// JoinHarness takes the run's harness network: sandboxes attach to its
// bridge directly (netharness.AttachTo).
func (b *Base) JoinHarness(n *netharness.Network) { b.joined.Set(n) }

// JoinedNetwork is the harness network JoinHarness took, nil before.
func (b *Base) JoinedNetwork() *netharness.Network { return b.joined.Get() }

// NetworkAPI is the engine client the harness network is created with and
// looked up through (the harness network is a Docker bridge network),
// made on first use unless WithDocker set one.
func (b *Base) NetworkAPI(ctx context.Context) (client.NetworkAPIClient, error) {
	b.dockerOnce.Do(func() {
		if b.docker != nil {
			return
		}
		c, err := client.New(client.FromEnv)
		if err != nil {
			b.dockerErr = fmt.Errorf("docker client for the harness network: %w", err)
			return
		}
		b.docker = c
	})
	return b.docker, b.dockerErr
}
