package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/netns"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the network namespace of the container's
// init, as the engine reports its pid. Under runc that is the namespace of
// every process in the box; under runsc the pid is the sandbox's own
// process, which lives in the container's namespace and, with runsc's host
// network (this harness's configuration), sends the box's traffic through
// it. A user-space network stack (runsc --network=sandbox) takes the
// container's addresses out of the namespace: the dial is then refused
// here, because what the host would find there is not the box's path.
func (s *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	pid, err := s.HostPID(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting %s for its addresses: %w", s.id, err)
	}
	var want []netip.Addr
	if ns := res.Container.NetworkSettings; ns != nil {
		for _, n := range ns.Networks {
			if n == nil {
				continue
			}
			for _, a := range []string{n.IPAddress.String(), n.GlobalIPv6Address.String()} {
				if ip, err := netip.ParseAddr(a); err == nil && ip.IsValid() && !ip.IsUnspecified() {
					want = append(want, ip)
				}
			}
		}
	}
	// The pid must still be the container's init once its namespace file
	// is held: a pid that ended and was reused names another namespace.
	still := func(ctx context.Context) error {
		now, err := s.HostPID(ctx)
		if err != nil {
			return err
		}
		if now != pid {
			return fmt.Errorf("sandbox %s: its init changed from pid %d to %d", s.id, pid, now)
		}
		return nil
	}
	if len(want) > 0 {
		if err := netns.Do(ctx, pid, still, func() error { return holdsAddrs(want) }); err != nil {
			return nil, err
		}
	}
	return netns.Dial(ctx, pid, still, d, network, addr)
}

// holdsAddrs checks, inside a namespace, that the container's addresses
// are on its interfaces.
func holdsAddrs(want []netip.Addr) error {
	have, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("listing the sandbox namespace's addresses: %w", err)
	}
	for _, w := range want {
		found := false
		for _, h := range have {
			if p, err := netip.ParsePrefix(h.String()); err == nil && p.Addr().Unmap() == w.Unmap() {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("the sandbox's address %s is not in its network namespace (a user-space network stack holds it): the namespace is not the box's path", w)
		}
	}
	return nil
}
