package bwrap

import (
	"context"
	"net"

	"github.com/sandcheck/sandcheck/internal/netns"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the sandbox's network namespace as
// pinned at start, while bwrap's child still waited to run the command
// (netns.Pin): not by the pid of the sandbox's first process, which in
// task launch is the box's own code and, where the box may make
// namespaces, could have moved itself into an empty namespace of its own
// so that every path looked closed.
func (sb *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if err := sb.Running(); err != nil {
		return nil, err
	}
	return netns.DialHeld(ctx, sb.netNS, d, network, addr)
}
