package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/netns"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.NetNSDialer = (*Sandbox)(nil)

// DialFromSandbox dials addr from the container's network namespace, as
// the engine holds it: the namespace file it made for the container (its
// SandboxKey), not the namespace the container's init is in now. Code in a
// box that may make namespaces (CAP_SYS_ADMIN, or user namespaces its
// seccomp profile allows) can move its first process, which in task mode
// is the probe the box controls, into an empty namespace of its own before
// the host looks: /proc/<pid>/ns/net would then show the host a path that
// is not the box's. Under runc the engine's namespace is every process's
// in the box; under runsc it is the one the sandbox's own process lives
// in, and with runsc's host network (this harness's configuration) the
// box's traffic goes through it. A user-space network stack (runsc
// --network=sandbox) takes the container's addresses out of the
// namespace: the dial is then refused here, because what the host would
// find there is not the box's path.
func (s *Sandbox) DialFromSandbox(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting %s for its network namespace: %w", s.id, err)
	}
	st, ns := res.Container.State, res.Container.NetworkSettings
	if st == nil || !st.Running {
		return nil, fmt.Errorf("sandbox %s is not running", s.id)
	}
	if ns == nil || ns.SandboxKey == "" {
		return nil, fmt.Errorf("sandbox %s: the engine names no network namespace file (SandboxKey)", s.id)
	}
	var want []netip.Addr
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
	if len(want) > 0 {
		if err := netns.DoFile(ctx, ns.SandboxKey, func() error { return holdsAddrs(want) }); err != nil {
			return nil, err
		}
	}
	return netns.DialFile(ctx, ns.SandboxKey, d, network, addr)
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
