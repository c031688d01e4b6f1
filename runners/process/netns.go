package process

import (
	"context"
	"fmt"
	"net"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/netns"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the network namespace of the sandbox's
// first process (the harness's namespace for it, or the host's own where
// the target gives it none).
func (sb *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	pid, err := sb.HostPID(ctx)
	if err != nil {
		return nil, err
	}
	still := func(ctx context.Context) error {
		if _, err := sb.HostPID(ctx); err != nil {
			return fmt.Errorf("pid %d: %w", pid, err)
		}
		return nil
	}
	return netns.Dial(ctx, pid, still, d, network, addr)
}
