package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The path facts (the catalog's host: netpath:<path>): before a probe of
// the egress or metadata family runs, the host itself dials, from inside
// the sandbox's network namespace (runners.NetNSDialer), the canary
// addresses the engine hands the probe. A canary that saw nothing is no
// evidence that the box could not reach it; a path the host found open is,
// and a probe's "blocked" then needs another host fact to stand.
//
// The dial is made before the probe's code runs, once per sandbox and
// address: in task mode the box's first process is the probe binary, and
// the box is gone once its batch ends (a namespace file held past that
// would show a namespace the runtime had emptied, every path
// "unreachable", a false confirmation); and it is the path as the platform
// made it, before the hostile code could touch its own routes.

// netpathTimeout bounds one dial: a path that drops packets costs this
// much, once per address and sandbox (the dials run together).
const netpathTimeout = time.Second

// netpathMaxAddrs bounds how many addresses one sandbox is dialled at.
const netpathMaxAddrs = 32

// netpathCheck is one path kind: what it stands for, the addresses of the
// probe's parameters it dials, and whether a closed path settles the probe
// (its own attempt is a TCP connection to exactly these addresses; a probe
// of UDP, ICMP or raw packets is only contradicted by an open TCP path
// to its destination, never confirmed by a closed one).
type netpathCheck struct {
	what     string
	addrs    func(p probes.Params) []string
	confirms bool
}

// netpathChecks is the closed table of path kinds (each one of
// probes.HostKinds). Only harness canaries named in the parameters are
// ever dialled, and only those the harness network holds (netpathAllowed).
var netpathChecks = map[string]netpathCheck{
	"netpath:metadata":  {"the metadata service", func(p probes.Params) []string { return one(p.MetadataAddr) }, true},
	"netpath:metadata6": {"the IPv6 metadata service", func(p probes.Params) []string { return one(p.Metadata6Addr) }, true},
	"netpath:ecs":       {"the ECS credentials endpoint", func(p probes.Params) []string { return one(p.ECSAddr) }, true},
	"netpath:alibaba":   {"the Alibaba Cloud metadata service", func(p probes.Params) []string { return one(p.AlibabaAddr) }, true},
	"netpath:kube-api":  {"the Kubernetes API canary", func(p probes.Params) []string { return one(p.KubeAPIAddr) }, true},
	"netpath:outside": {"the outside address's TCP sinks", func(p probes.Params) []string {
		return onPorts(p.OutsideAddr, netharness.SinkTCPPorts)
	}, true},
	"netpath:outside-route": {"the outside address (its TCP sinks, the route the probe's packets take)", func(p probes.Params) []string {
		return onPorts(p.OutsideAddr, netharness.SinkTCPPorts)
	}, false},
	"netpath:outside6": {"the outside IPv6 address's TCP sink", func(p probes.Params) []string {
		return onPorts(p.Outside6Addr, netharness.OutsidePorts6)
	}, true},
	"netpath:mirror":         {"the package mirror", func(p probes.Params) []string { return one(p.MirrorAddr) }, true},
	"netpath:other-resolver": {"a DNS server the sandbox was not configured to use (over TCP)", func(p probes.Params) []string { return one(p.OtherResolverAddr) }, false},
	"netpath:dns-alt":        {"the DNS canary's alternate port (over TCP)", func(p probes.Params) []string { return one(p.DNSAltAddr) }, false},
	"netpath:dot":            {"the DNS-over-TLS server", func(p probes.Params) []string { return one(p.DoTAddr) }, true},
	"netpath:doh":            {"the DNS-over-HTTPS server", func(p probes.Params) []string { return one(p.DoHAddr) }, true},
	"netpath:gateway-services": {"the host services on the network's gateway", func(p probes.Params) []string {
		return onPorts(p.GatewayAddr, netharness.GatewayServicePorts)
	}, true},
	"netpath:neighbour": {"the neighbouring sandbox's listeners", func(p probes.Params) []string {
		return onPorts(p.NeighbourAddr, netharness.NeighbourPorts)
	}, true},
}

func one(addr string) []string {
	if addr == "" {
		return nil
	}
	return []string{addr}
}

func onPorts(ip string, ports []int) []string {
	if ip == "" {
		return nil
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort(ip, strconv.Itoa(p))
	}
	return out
}

// pathDial is what one dial from a sandbox's namespace found.
type pathDial struct {
	open bool
	// unknown is set when the namespace could not be entered: no fact.
	unknown bool
	how     string // "connected", "refused", "unreachable", "no answer within 1s", or why unknown
}

// netpaths holds a sandbox's dial results by address.
type netpaths struct {
	mu sync.Mutex
	m  map[string]pathDial
}

// netpathParams are the canary addresses the engine hands every probe
// (probeParams fills the same from the same network).
func (e *Engine) netpathParams() probes.Params {
	var p probes.Params
	if e.net != nil {
		e.net.FillParams(&p)
	}
	return p
}

// netpathAllowed reports whether addr is one the harness holds for this
// run: nothing else is ever dialled, whatever a parameter says.
func (e *Engine) netpathAllowed(addr string) bool {
	if e.net == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	return slices.Contains(e.net.Owned(), ap.Addr().Unmap())
}

// dialPaths dials, before the given probes run in s, every path their
// netpath kinds name that s has not been dialled at yet. A sandbox whose
// runner cannot enter its namespace is not dialled: its probes keep the
// grading they had without the fact.
func (e *Engine) dialPaths(ctx context.Context, s *sandbox, specs []probes.Spec) {
	d, ok := s.sb.(runners.NetNSDialer)
	if !ok || e.net == nil {
		return
	}
	p := e.netpathParams()
	s.paths.mu.Lock()
	if s.paths.m == nil {
		s.paths.m = map[string]pathDial{}
	}
	var todo []string
	for _, spec := range specs {
		for _, h := range spec.Host {
			c, ok := netpathChecks[h]
			if !ok {
				continue
			}
			for _, a := range c.addrs(p) {
				if _, done := s.paths.m[a]; done || slices.Contains(todo, a) || !e.netpathAllowed(a) {
					continue
				}
				todo = append(todo, a)
			}
		}
	}
	s.paths.mu.Unlock()
	if len(todo) > netpathMaxAddrs {
		todo = todo[:netpathMaxAddrs]
	}
	found := make([]pathDial, len(todo))
	var wg sync.WaitGroup
	for i, a := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = dialPath(ctx, d, a)
		}()
	}
	wg.Wait()
	s.paths.mu.Lock()
	for i, a := range todo {
		s.paths.m[a] = found[i]
	}
	s.paths.mu.Unlock()
}

// dialPath makes one bounded TCP connection attempt from the sandbox's
// namespace and closes what it opened; nothing is sent.
func dialPath(ctx context.Context, d runners.NetNSDialer, addr string) pathDial {
	dctx, cancel := context.WithTimeout(ctx, netpathTimeout)
	defer cancel()
	c, err := d.DialFromSandbox(dctx, "tcp", addr)
	if err == nil {
		c.Close()
		return pathDial{open: true, how: "connected"}
	}
	var oe *net.OpError
	if !errors.As(err, &oe) {
		return pathDial{unknown: true, how: "the host could not enter the sandbox's network namespace: " + err.Error()}
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return pathDial{how: "refused"}
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return pathDial{how: "unreachable"}
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), oe.Timeout():
		return pathDial{how: fmt.Sprintf("no answer within %s", netpathTimeout)}
	}
	return pathDial{how: "failed: " + oe.Err.Error()}
}

// netpathObserver turns the dials made for the probe's sandbox into the
// path fact of one kind: open (some address connected: the box could have
// reached it whatever its probe says), closed (every address refused or
// unreachable: it confirms blocked where the kind settles the probe), or
// unknown. No item where the sandbox was not dialled.
func netpathObserver(e *Engine, kind string, o observation) []evidence.Item {
	c, ok := netpathChecks[kind]
	if !ok || o.s == nil {
		return nil
	}
	if _, ok := o.s.sb.(runners.NetNSDialer); !ok || e.net == nil {
		return nil
	}
	addrs := c.addrs(e.netpathParams())
	if len(addrs) == 0 {
		return nil
	}
	o.s.paths.mu.Lock()
	defer o.s.paths.mu.Unlock()
	var opened, closed, unknown []string
	for _, a := range addrs {
		r, done := o.s.paths.m[a]
		switch {
		case !done:
			unknown = append(unknown, a+" not dialled")
		case r.unknown:
			unknown = append(unknown, a+": "+r.how)
		case r.open:
			opened = append(opened, a)
		default:
			closed = append(closed, a+" "+r.how)
		}
	}
	data := map[string]string{"path": strings.TrimPrefix(kind, "netpath:"), "addrs": strings.Join(addrs, ",")}
	it := evidence.Item{Source: evidence.SourceRuntime, Data: data}
	switch {
	case len(opened) > 0:
		it.Kind = "netpath-open"
		data["open"] = strings.Join(opened, ",")
		it.Summary = fmt.Sprintf("from the sandbox's network namespace the host connected to %s at %s (tcp, before the probe ran)", c.what, strings.Join(opened, ", "))
	case len(unknown) > 0:
		it.Kind = "netpath-unknown"
		it.Summary = fmt.Sprintf("the host could not tell whether the sandbox's network namespace reaches %s: %s", c.what, truncate(strings.Join(unknown, "; "), 300))
	default:
		it.Kind = "netpath-closed"
		it.Summary = fmt.Sprintf("from the sandbox's network namespace no TCP connection to %s got through: %s", c.what, strings.Join(closed, ", "))
		if c.confirms {
			it.Indicates = probes.Blocked
		}
	}
	return []evidence.Item{it}
}
