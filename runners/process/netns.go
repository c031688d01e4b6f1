package process

import (
	"context"
	"net"

	"github.com/sandcheck/sandcheck/internal/netns"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the network namespace of the sandbox's
// first process (the harness's namespace for it, or the host's own where
// the target gives it none).
func (sb *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	return netns.DialAsPID(ctx, sb.HostPID, d, network, addr)
}
