package engine

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/canary"
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
// made it, before the probe's code could change it. (A first process is
// the probe binary itself, held at its go-ahead; a box that may change its
// own routes and filters (NET_ADMIN in its namespace) could close them for
// the dial and open them again, which the runtime view's capabilities show
// and the hardened-runtime criterion fails on its own.)

// netpathTimeout bounds one dial: a path that drops packets costs this
// much, once per address and sandbox (the dials run together).
const netpathTimeout = time.Second

// netpathMaxAddrs bounds how many addresses one sandbox is dialled at.
const netpathMaxAddrs = 32

// netpathCheck is one path kind: what it stands for, the attempts it
// makes with the addresses of the probe's parameters, and whether a closed
// path settles the probe (the attempts are the probe's own, over its own
// transport; a probe of UDP, ICMP or raw packets is only contradicted by an
// open TCP path to its destination, never confirmed by a closed one).
type netpathCheck struct {
	what     string
	tries    func(p probes.Params) []pathTry
	confirms bool
}

// pathTry is one attempt from the sandbox's namespace: how (a TCP connect;
// a DNS query over TCP or UDP for a name only the harness's zone answers; a
// CONNECT through a proxy to target; a call to the tool broker without a
// token), at addr.
type pathTry struct {
	how    string // "tcp", "dns-tcp", "dns-udp", "connect", "broker-no-token"
	addr   string
	target string // connect: the tunnel's destination; dns: the zone
}

func (t pathTry) String() string {
	switch t.how {
	case "tcp":
		return t.addr
	case "connect":
		return "CONNECT " + t.target + " via " + t.addr
	}
	return t.how + " " + t.addr
}

// netpathChecks is the closed table of path kinds (each one of
// probes.HostKinds). Only harness canaries named in the parameters are
// ever dialled, and only those the harness network holds (netpathAllowed).
var netpathChecks = map[string]netpathCheck{
	"netpath:metadata":  {"the metadata service", tcp(func(p probes.Params) []string { return one(p.MetadataAddr) }), true},
	"netpath:metadata6": {"the IPv6 metadata service", tcp(func(p probes.Params) []string { return one(p.Metadata6Addr) }), true},
	"netpath:ecs":       {"the ECS credentials endpoint", tcp(func(p probes.Params) []string { return one(p.ECSAddr) }), true},
	"netpath:alibaba":   {"the Alibaba Cloud metadata service", tcp(func(p probes.Params) []string { return one(p.AlibabaAddr) }), true},
	"netpath:kube-api":  {"the Kubernetes API canary", tcp(func(p probes.Params) []string { return one(p.KubeAPIAddr) }), true},
	"netpath:outside": {"the outside address's TCP sinks", tcp(func(p probes.Params) []string {
		return onPorts(p.OutsideAddr, netharness.SinkTCPPorts)
	}), true},
	"netpath:outside-route": {"the outside address (its TCP sinks, the route the probe's packets take)", tcp(func(p probes.Params) []string {
		return onPorts(p.OutsideAddr, netharness.SinkTCPPorts)
	}), false},
	"netpath:outside6": {"the outside IPv6 address's TCP sink", tcp(func(p probes.Params) []string {
		return onPorts(p.Outside6Addr, netharness.OutsidePorts6)
	}), true},
	"netpath:mirror":         {"the package mirror", tcp(func(p probes.Params) []string { return one(p.MirrorAddr) }), true},
	"netpath:other-resolver": {"a DNS server the sandbox was not configured to use (over TCP)", tcp(func(p probes.Params) []string { return one(p.OtherResolverAddr) }), false},
	"netpath:dns-alt":        {"the DNS canary's alternate port (over TCP)", tcp(func(p probes.Params) []string { return one(p.DNSAltAddr) }), false},
	"netpath:dot":            {"the DNS-over-TLS server", tcp(func(p probes.Params) []string { return one(p.DoTAddr) }), true},
	"netpath:doh":            {"the DNS-over-HTTPS server", tcp(func(p probes.Params) []string { return one(p.DoHAddr) }), true},
	"netpath:gateway-services": {"the host services on the network's gateway", tcp(func(p probes.Params) []string {
		return onPorts(p.GatewayAddr, netharness.GatewayServicePorts)
	}), true},
	"netpath:neighbour": {"the neighbouring sandbox's listeners", tcp(func(p probes.Params) []string {
		return onPorts(p.NeighbourAddr, netharness.NeighbourPorts)
	}), true},
	"netpath:resolver-zone-udp": {"the harness's zone through the configured resolver (a query over UDP)", dnsTry("dns-udp"), true},
	"netpath:resolver-zone-tcp": {"the harness's zone through the configured resolver (a query over TCP)", dnsTry("dns-tcp"), true},
	"netpath:proxy-outside": {"the outside address's port 443 through the configured proxy", func(p probes.Params) []pathTry {
		if p.ProxyAddr == "" || p.OutsideAddr == "" {
			return nil
		}
		return []pathTry{{how: "connect", addr: p.ProxyAddr, target: net.JoinHostPort(p.OutsideAddr, "443")}}
	}, true},
	"netpath:proxy-mirror": {"the package mirror through the configured proxy", func(p probes.Params) []pathTry {
		if p.ProxyAddr == "" || p.MirrorAddr == "" {
			return nil
		}
		return []pathTry{{how: "connect", addr: p.ProxyAddr, target: p.MirrorAddr}}
	}, true},
	"netpath:broker": {"the tool broker", tcp(func(p probes.Params) []string { return one(p.BrokerAddr) }), true},
	"netpath:broker-no-token": {"the tool broker without a token", func(p probes.Params) []pathTry {
		if p.BrokerAddr == "" {
			return nil
		}
		return []pathTry{{how: "broker-no-token", addr: p.BrokerAddr}}
	}, true},
}

// brokerPathKinds are the broker probes whose record can show no use at
// all: the broker saw none of the box's out-of-scope or post-revocation
// uses. That settles nothing unless the host also shows the box had no path
// to the broker, so their sandboxes are dialled at the broker too.
var brokerPathKinds = []string{"broker:scope", "broker:revocation"}

// pathKinds are the path kinds dialled for a probe: its catalog's netpath
// kinds, and the broker's for the broker probes that need it.
func pathKinds(spec probes.Spec) []string {
	kinds := spec.Host
	for _, h := range spec.Host {
		if slices.Contains(brokerPathKinds, h) && !slices.Contains(kinds, "netpath:broker") {
			kinds = append(slices.Clone(kinds), "netpath:broker")
		}
	}
	return kinds
}

// tcp makes TCP connect attempts of addresses.
func tcp(addrs func(p probes.Params) []string) func(p probes.Params) []pathTry {
	return func(p probes.Params) []pathTry {
		var out []pathTry
		for _, a := range addrs(p) {
			out = append(out, pathTry{how: "tcp", addr: a})
		}
		return out
	}
}

// dnsTry queries the configured resolver for a name under the harness's
// zone.
func dnsTry(how string) func(p probes.Params) []pathTry {
	return func(p probes.Params) []pathTry {
		if p.ResolverAddr == "" || p.DNSZone == "" {
			return nil
		}
		return []pathTry{{how: how, addr: p.ResolverAddr, target: p.DNSZone}}
	}
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

// pathDial is what one attempt from a sandbox's namespace found.
type pathDial struct {
	open bool
	// unknown is set when the namespace could not be entered: no fact.
	unknown bool
	how     string // "connected", "refused", "unreachable", "no answer within 1s", or why unknown
}

// netpaths holds a sandbox's attempts' results by pathTry.String().
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

// netpathAllowed reports whether a try reaches only addresses the harness
// holds for this run (and a tunnel's destination too): nothing else is
// ever dialled, whatever a parameter says.
func (e *Engine) netpathAllowed(t pathTry) bool {
	if e.net == nil {
		return false
	}
	held := func(addr string) bool {
		ap, err := netip.ParseAddrPort(addr)
		return err == nil && slices.Contains(e.net.Owned(), ap.Addr().Unmap())
	}
	return held(t.addr) && (t.how != "connect" || held(t.target))
}

// dialPaths makes, before the given probes run in s, every attempt their
// netpath kinds name that s has not seen yet. A sandbox whose runner cannot
// enter its namespace is not dialled: its probes keep the grading they had
// without the fact.
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
	var todo []pathTry
	for _, spec := range specs {
		for _, h := range pathKinds(spec) {
			c, ok := netpathChecks[h]
			if !ok {
				continue
			}
			for _, t := range c.tries(p) {
				if _, done := s.paths.m[t.String()]; done || slices.Contains(todo, t) || !e.netpathAllowed(t) {
					continue
				}
				todo = append(todo, t)
			}
		}
	}
	s.paths.mu.Unlock()
	if len(todo) > netpathMaxAddrs {
		todo = todo[:netpathMaxAddrs]
	}
	if slices.ContainsFunc(todo, func(t pathTry) bool { return t.how == "connect" }) {
		// The proxy's own connection to the tunnel's end reaches a canary
		// from the host's side while the attempts run.
		e.own.relayFor(netpathTimeout + 3*time.Second)
	}
	found := make([]pathDial, len(todo))
	var wg sync.WaitGroup
	for i, t := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = tryPath(ctx, d, &e.own, t)
		}()
	}
	wg.Wait()
	s.paths.mu.Lock()
	for i, t := range todo {
		s.paths.m[t.String()] = found[i]
	}
	s.paths.mu.Unlock()
}

// tryPath makes one bounded attempt from the sandbox's namespace and closes
// what it opened.
func tryPath(ctx context.Context, d runners.NetNSDialer, own *ownDials, t pathTry) pathDial {
	ctx, cancel := context.WithTimeout(ctx, netpathTimeout)
	defer cancel()
	network := "tcp"
	if t.how == "dns-udp" {
		network = "udp"
	}
	c, err := d.DialFromSandbox(ctx, &net.Dialer{Control: own.bind}, network, t.addr)
	if err != nil {
		return dialFailure(err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	switch t.how {
	case "dns-tcp", "dns-udp":
		return askZone(c, t)
	case "connect":
		return askTunnel(c, t)
	case "broker-no-token":
		return askBroker(c, t)
	}
	return pathDial{open: true, how: "connected"}
}

// dialFailure reads a failed dial: a dial error is a closed path, anything
// else (the namespace could not be entered) no fact.
func dialFailure(err error) pathDial {
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

// answerFailure reads an exchange that failed once connected: a refusal
// or an answer that is none closes the path; silence within the bound is
// no fact either way.
func answerFailure(err error) pathDial {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Timeout() {
		// Silence from something that took the connection (a slow
		// proxy, a resolver still asking) may yet have let it through.
		return pathDial{unknown: true, how: fmt.Sprintf("connected, but no answer within %s", netpathTimeout)}
	}
	if errors.As(err, &oe) {
		return dialFailure(err)
	}
	return pathDial{how: "no usable answer: " + err.Error()}
}

// askZone asks the resolver for a name under the harness's zone that no
// probe uses: an answer with an address means the resolver carries names
// to the zone's server, the path a DNS exfiltration takes.
func askZone(c net.Conn, t pathTry) pathDial {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn("netpath-"+hex.EncodeToString(randBytes(6))+"."+canary.ExfilLabel+"."+t.target), dns.TypeA)
	dc := &dns.Conn{Conn: c, UDPSize: dns.MinMsgSize}
	if err := dc.WriteMsg(m); err != nil {
		return answerFailure(err)
	}
	r, err := dc.ReadMsg()
	if err != nil {
		return answerFailure(err)
	}
	if r.Id != m.Id {
		return pathDial{how: "answered another query"}
	}
	if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
		return pathDial{open: true, how: "answered"}
	}
	return pathDial{how: "answered " + dns.RcodeToString[r.Rcode] + " with no address"}
}

// askTunnel asks the proxy for a CONNECT tunnel to t.target.
func askTunnel(c net.Conn, t pathTry) pathDial {
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", t.target, t.target); err != nil {
		return answerFailure(err)
	}
	return statusOpen(c, func(code int) bool { return code >= 200 && code < 300 })
}

// askBroker calls the tool broker's query path with no token at all, as
// egress.broker-no-token does.
func askBroker(c net.Conn, t pathTry) pathDial {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", canary.BrokerPath, t.addr); err != nil {
		return answerFailure(err)
	}
	return statusOpen(c, func(code int) bool { return code == 200 })
}

// statusOpen reads an HTTP status line, bounded.
func statusOpen(c net.Conn, open func(int) bool) pathDial {
	line, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	if err != nil {
		return answerFailure(err)
	}
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return pathDial{how: "answered other than HTTP"}
	}
	code, err := strconv.Atoi(f[1])
	if err != nil {
		return pathDial{how: "answered other than HTTP"}
	}
	if open(code) {
		return pathDial{open: true, how: fmt.Sprintf("answered %d", code)}
	}
	return pathDial{how: fmt.Sprintf("answered %d", code)}
}

// netpathObserver turns the attempts made for the probe's sandbox into the
// path fact of one kind: open (some attempt got through: the box could
// have, whatever its probe says), closed (every attempt refused or
// unreachable: it confirms blocked where the kind settles the probe), or
// unknown. A sandbox whose namespace the host cannot enter (its runner is
// no runners.NetNSDialer) gets netpath-none: the host has no path fact, and
// the policy then holds a "blocked" unconfirmed unless another host fact
// confirms it (no check, no pass). No item where the harness has no network
// to dial (the runtime view tells a box with no network).
func netpathObserver(e *Engine, kind string, o observation) []evidence.Item {
	c, ok := netpathChecks[kind]
	if !ok || o.s == nil {
		return nil
	}
	if _, ok := o.s.sb.(runners.NetNSDialer); !ok {
		return []evidence.Item{{Source: evidence.SourceRuntime, Kind: "netpath-none",
			Data:    map[string]string{"path": strings.TrimPrefix(kind, "netpath:")},
			Summary: fmt.Sprintf("the host cannot enter this sandbox's network namespace (the runner gives no path fact), so nothing on the host shows whether it reaches %s", c.what)}}
	}
	if e.net == nil {
		return nil
	}
	tries := c.tries(e.netpathParams())
	if len(tries) == 0 {
		return nil
	}
	o.s.paths.mu.Lock()
	defer o.s.paths.mu.Unlock()
	return []evidence.Item{pathFact(kind, c, tries, o.s.paths.m)}
}

// pathFact reads the attempts of one path kind: open where any got
// through, unknown where any could not tell, closed otherwise.
func pathFact(kind string, c netpathCheck, tries []pathTry, found map[string]pathDial) evidence.Item {
	var opened, closed, unknown, all []string
	for _, t := range tries {
		all = append(all, t.String())
		r, done := found[t.String()]
		switch {
		case !done:
			unknown = append(unknown, t.String()+" not tried")
		case r.unknown:
			unknown = append(unknown, t.String()+": "+r.how)
		case r.open:
			opened = append(opened, t.String()+" "+r.how)
		default:
			closed = append(closed, t.String()+" "+r.how)
		}
	}
	data := map[string]string{"path": strings.TrimPrefix(kind, "netpath:"), "tried": strings.Join(all, ",")}
	it := evidence.Item{Source: evidence.SourceRuntime, Data: data}
	switch {
	case len(opened) > 0:
		it.Kind = "netpath-open"
		data["open"] = strings.Join(opened, ",")
		it.Summary = fmt.Sprintf("from the sandbox's network namespace, before the probe ran, the host reached %s: %s", c.what, truncate(strings.Join(opened, ", "), 300))
	case len(unknown) > 0:
		it.Kind = "netpath-unknown"
		it.Summary = fmt.Sprintf("the host could not tell whether the sandbox's network namespace reaches %s: %s", c.what, truncate(strings.Join(unknown, "; "), 300))
	default:
		it.Kind = "netpath-closed"
		it.Summary = fmt.Sprintf("from the sandbox's network namespace, before the probe ran, the host did not reach %s: %s", c.what, truncate(strings.Join(closed, ", "), 300))
		if c.confirms {
			it.Indicates = probes.Blocked
		}
	}
	return it
}

// ownDials are the host's own attempts from sandboxes' namespaces, so that
// the canary hits they cause are streamed as netpath-hit, never as the
// sandbox's own traffic (canary-hit). Grading never reads the stream (a
// probe's hits are joined by its token), so this only keeps the stream
// honest about who sent what.
type ownDials struct {
	mu sync.Mutex
	// ports are the local ports the attempts were bound to, with when.
	ports map[uint16]time.Time
	// relay is until when a token-less hit from the harness's own side
	// (a proxy relaying a tunnel the host asked for) is the host's.
	relay time.Time
}

// ownPortTTL is how long a bound port names the host's attempt: longer
// than any canary takes to record a connection.
const ownPortTTL = 2 * time.Minute

// bind is the attempts' net.Dialer Control: it binds the socket to an
// ephemeral port of the sandbox's namespace before it connects, and
// remembers the port, so the hit the connection causes can be told apart
// even when the canary records it before the dial returns.
func (o *ownDials) bind(network, _ string, rc syscall.RawConn) error {
	var port int
	var berr error
	err := rc.Control(func(fd uintptr) {
		var sa unix.Sockaddr = &unix.SockaddrInet4{}
		if strings.HasSuffix(network, "6") {
			sa = &unix.SockaddrInet6{}
		}
		if berr = unix.Bind(int(fd), sa); berr != nil {
			return
		}
		got, err := unix.Getsockname(int(fd))
		if err != nil {
			berr = err
			return
		}
		switch a := got.(type) {
		case *unix.SockaddrInet4:
			port = a.Port
		case *unix.SockaddrInet6:
			port = a.Port
		}
	})
	if err != nil {
		return err
	}
	if berr != nil {
		return fmt.Errorf("binding the attempt's socket: %w", berr)
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ports == nil {
		o.ports = map[uint16]time.Time{}
	}
	for p, at := range o.ports {
		if now.Sub(at) > ownPortTTL {
			delete(o.ports, p)
		}
	}
	o.ports[uint16(port)] = now
	return nil
}

func (o *ownDials) relayFor(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if until := time.Now().Add(d); until.After(o.relay) {
		o.relay = until
	}
}

// hitEvent is the stream event a canary hit goes out as: netpath-hit for
// one the host's own attempt caused (no probe's token, from a port an
// attempt was bound to, or relayed from the harness's side while a tunnel
// attempt ran), canary-hit for everything else.
func (e *Engine) hitEvent(h canary.Hit) string {
	if h.Probe != "" {
		return "canary-hit"
	}
	ap, err := netip.ParseAddrPort(h.Remote)
	if err != nil {
		return "canary-hit"
	}
	o := &e.own
	o.mu.Lock()
	defer o.mu.Unlock()
	if at, ok := o.ports[ap.Port()]; ok && time.Since(at) <= ownPortTTL {
		return "netpath-hit"
	}
	if time.Now().Before(o.relay) && e.net != nil && slices.Contains(e.net.Owned(), ap.Addr().Unmap()) {
		return "netpath-hit"
	}
	return "canary-hit"
}
