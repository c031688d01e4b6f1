package process

import (
	"context"
	"fmt"
	"net"

	"github.com/sandcheck/sandcheck/internal/netns"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the sandbox's network namespace: the one
// the harness made for it and holds (every command of the sandbox is
// started into it), never the namespace its first process is in now, which
// code of the box could have changed.
func (sb *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if err := sb.Running(); err != nil {
		return nil, err
	}
	if sb.Net == nil {
		return nil, fmt.Errorf("sandbox %s: no network namespace held", sb.SandboxID)
	}
	return netns.DialHeld(ctx, sb.Net.File(), d, network, addr)
}
