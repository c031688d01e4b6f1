package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The probes that aim at the run's peers: a neighbour sandbox's execd, and
// the harness's canary reached by IP literal.
const (
	neighbourProbe = "egress.opensandbox-neighbour-execd"
	ipLiteralProbe = "egress.opensandbox-ip-literal"
)

// peers is what the runner makes beside the probes' sandboxes for the
// whole run: a neighbour sandbox made through the same lifecycle API (its
// execd endpoint as the platform names it) and a TCP canary on the host's
// own address facing the sandboxes' network.
type peers struct {
	mu         sync.Mutex
	neighbour  *Sandbox
	execdAddr  string
	canary     *ipCanary
	canaryAddr string
}

// Prepare implements runners.PlatformPeers: when a selected probe aims at
// them, it starts the neighbour sandbox and the canary. A platform that
// cannot start the neighbour fails the run (exit 2) with the call named.
func (r *Runner) Prepare(ctx context.Context, selected []probes.Spec) error {
	need := false
	for _, s := range selected {
		if s.ID == neighbourProbe || s.ID == ipLiteralProbe {
			need = true
		}
	}
	if !need {
		return nil
	}
	r.peers.mu.Lock()
	defer r.peers.mu.Unlock()
	if r.peers.neighbour != nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, defaultStartTimeout)
	defer cancel()
	spec := runners.SandboxSpec{Name: fmt.Sprintf("sandcheck-neighbour-%s", randSuffix()),
		Labels: map[string]string{"sandcheck.task": "neighbour"}}
	sb, err := r.launch(sctx, ctx, spec, defaultStartTimeout)
	if err != nil {
		return fmt.Errorf("starting the neighbour sandbox: %w", err)
	}
	r.peers.neighbour = sb
	ep := sb.endpoint
	ap := ep.addr
	if !ap.IsValid() || !ap.Addr().Unmap().Is4() {
		// Probes reach literal addresses only; a platform that names execd
		// by host name gives the probes nothing to try.
		r.log.Warn("the neighbour's execd endpoint names no IPv4 address; its probes get none", "endpoint", sb.Endpoint)
		return nil
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	switch {
	case ep.scheme != "http":
		// The neighbour probe speaks plain HTTP; behind TLS it would only
		// be inconclusive, so it is given nothing.
		r.log.Warn("the neighbour's execd endpoint is not plain HTTP; the neighbour probe gets no address", "endpoint", sb.Endpoint)
	case !ep.direct:
		r.log.Warn("the neighbour's execd endpoint is behind a path other than execd's own; the neighbour probe gets no address", "endpoint", sb.Endpoint)
	default:
		// Bare, or behind execd's own /proxy/44772 (upstream's bridge
		// mode): the same host:port is execd itself, which the probe asks.
		r.peers.execdAddr = ap.String()
	}
	if r.peers.canary, err = startCanary(ap, r.log); err != nil {
		return err
	}
	r.peers.canaryAddr = r.peers.canary.addr
	return nil
}

// FillParams implements runners.PlatformPeers.
func (r *Runner) FillParams(p *probes.Params) {
	r.peers.mu.Lock()
	defer r.peers.mu.Unlock()
	p.NeighbourExecdAddr = r.peers.execdAddr
	p.IPCanaryAddr = r.peers.canaryAddr
}

// ClosePeers implements runners.PlatformPeers: it deletes the neighbour
// through the API and stops the canary.
func (r *Runner) ClosePeers(ctx context.Context) error {
	r.peers.mu.Lock()
	defer r.peers.mu.Unlock()
	var errs []error
	if r.peers.canary != nil {
		errs = append(errs, r.peers.canary.close())
		r.peers.canary = nil
	}
	if r.peers.neighbour != nil {
		errs = append(errs, r.peers.neighbour.Close(ctx))
		r.peers.neighbour = nil
	}
	r.peers.execdAddr, r.peers.canaryAddr = "", ""
	return errors.Join(errs...)
}

// hostAddrFacing is the host's own address the kernel would send from to
// reach addr (a UDP connect sends nothing).
func hostAddrFacing(addr netip.AddrPort) (netip.Addr, error) {
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("finding the host's address facing %s: %w", addr, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
