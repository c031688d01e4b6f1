package impl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/probes"
)

// The proxy path of every egress and metadata probe. Where the target says
// its wrapper filters the box's egress through a proxy of its own (srt's),
// the direct attempt a probe makes is only one way out: hostile code can
// hand its destination to the proxy instead. Run gives every egress and
// metadata probe a second half (withProxyPaths): its destination (its
// proxyPlan) tried through each proxy the box's environment names that
// the target declares the wrapper announces (p.WrapperProxies): an
// absolute-form GET and a CONNECT tunnel through an HTTP proxy, a CONNECT
// through a SOCKS5 one. Each attempt's attribution names its path
// ("<token>/<probe>/via-socks5"), so the canary's record tells which path
// reached it.
//
// A path the probe saw reach its destination makes the result
// inconclusive, never escaped on the probe's word: the harness canary's
// record of the probe's token (host evidence) is what makes it an escape.

// Canary path tags (canary.Hit.Via).
const (
	viaGet     = "via-get"
	viaConnect = "via-connect"
	viaSocks5  = "via-socks5"
)

// proxyRoute is one way through a proxy the box was handed.
type proxyRoute struct {
	via  string   // viaGet, viaConnect or viaSocks5
	addr string   // loopback IP:port, declared by the target
	vars []string // the variables of the box's environment naming it
	user string
	pass string
}

func (r proxyRoute) String() string {
	return r.via + " " + r.addr + " (" + strings.Join(r.vars, ",") + ")"
}

// routeVars are the variables a wrapper names its proxies in, and the
// ways through a proxy each stands for: HTTP_PROXY an HTTP proxy (GET and
// CONNECT), HTTPS_PROXY a CONNECT proxy, ALL_PROXY either protocol (srt's
// port speaks both), FTP_PROXY a SOCKS5 proxy (srt's socks5h URL).
var routeVars = []struct {
	name string
	vias []string
}{
	{"HTTP_PROXY", []string{viaGet, viaConnect}}, {"http_proxy", []string{viaGet, viaConnect}},
	{"HTTPS_PROXY", []string{viaConnect}}, {"https_proxy", []string{viaConnect}},
	{"ALL_PROXY", []string{viaConnect, viaSocks5}}, {"all_proxy", []string{viaConnect, viaSocks5}},
	{"FTP_PROXY", []string{viaSocks5}}, {"ftp_proxy", []string{viaSocks5}},
}

// boxRoutes are the routes through the proxies the environment names and
// the target declares, and what was skipped and why. A proxy is tried
// only at an address the target declares speaking its protocol: an HTTP
// route at a declared http:// endpoint, a SOCKS5 route at a declared
// socks5:// one.
func boxRoutes(p probes.Params) (routes []proxyRoute, skipped []string) {
	for _, rv := range routeVars {
		v := os.Getenv(rv.name)
		if v == "" {
			continue
		}
		ep, err := probes.WrapperProxyEndpoint(v)
		if err != nil {
			skipped = append(skipped, rv.name+": "+err.Error())
			continue
		}
		_, addr, _ := strings.Cut(ep, "://")
		var user, pass string
		if u, err := url.Parse(v); err == nil && u.User != nil {
			user = u.User.Username()
			pass, _ = u.User.Password()
		}
		tried := false
		for _, via := range rv.vias {
			scheme := "http://"
			if via == viaSocks5 {
				scheme = "socks5://"
			}
			if !slices.Contains(p.WrapperProxies, scheme+addr) {
				continue
			}
			tried = true
			i := slices.IndexFunc(routes, func(r proxyRoute) bool { return r.via == via && r.addr == addr })
			if i < 0 {
				routes = append(routes, proxyRoute{via: via, addr: addr, user: user, pass: pass})
				i = len(routes) - 1
			}
			if !slices.Contains(routes[i].vars, rv.name) {
				routes[i].vars = append(routes[i].vars, rv.name)
			}
		}
		if !tried {
			skipped = append(skipped, rv.name+": "+addr+" is no proxy the target declares for it")
		}
	}
	return routes, skipped
}

// proxyDest is one destination of a probe, an IP literal host:port, and
// the HTTP request that asks it (method, path, extra headers). A sink
// destination (hello) is asked with the probe's hello through a tunnel
// and a GET of / through an HTTP proxy; it is reached when the sink's
// reply comes back. An HTTP destination is reached when it answers
// through a tunnel, or answers 2xx with a body to a proxied GET.
type proxyDest struct {
	addr   string
	hello  bool
	method string
	path   string
	header []string
}

// proxyPlan says where a probe goes: its destinations from the harness's
// addresses, or why it has no proxy path (a UDP or ICMP probe: CONNECT
// and SOCKS5 CONNECT carry TCP only).
type proxyPlan struct {
	dests func(p probes.Params) []proxyDest
	none  string
}

func sinkPorts(addr func(probes.Params) string, ports ...int) func(probes.Params) []proxyDest {
	return func(p probes.Params) []proxyDest {
		a := addr(p)
		if a == "" {
			return nil
		}
		var ds []proxyDest
		for _, port := range ports {
			ds = append(ds, proxyDest{addr: net.JoinHostPort(a, strconv.Itoa(port)), hello: true})
		}
		return ds
	}
}

func httpDest(addr func(probes.Params) string, method, path string, header ...string) func(probes.Params) []proxyDest {
	return func(p probes.Params) []proxyDest {
		a := addr(p)
		if a == "" {
			return nil
		}
		return []proxyDest{{addr: a, method: method, path: path, header: header}}
	}
}

func outsideIP(p probes.Params) string   { return p.OutsideAddr }
func gatewayIP(p probes.Params) string   { return p.GatewayAddr }
func neighbourIP(p probes.Params) string { return p.NeighbourAddr }
func outside6IP(p probes.Params) string  { return p.Outside6Addr }
func metadataHP(p probes.Params) string  { return metadataAddr(p.MetadataAddr) }
func mirrorHP(p probes.Params) string    { return p.MirrorAddr }
func brokerHP(p probes.Params) string    { return p.BrokerAddr }
func ecsHP(p probes.Params) string       { return p.ECSAddr }
func alibabaHP(p probes.Params) string   { return p.AlibabaAddr }
func metadata6HP(p probes.Params) string { return p.Metadata6Addr }

const (
	noProxyUDP   = "a UDP probe: CONNECT and SOCKS5 CONNECT carry TCP only"
	noProxyICMP  = "an ICMP or raw-socket probe: a proxy carries TCP streams only"
	noProxyTLS   = "its destination speaks TLS, which the proxy path does not carry (the direct attempt stands alone)"
	noProxyDNS   = "a DNS-over-TCP probe: the proxy path does not carry DNS (the direct attempt stands alone)"
	noProxyFiles = "it reads files in the box and sends nothing"
	noProxySelf  = "it is itself the proxy path"
	noProxyOSB   = "a probe of OpenSandbox's own platform, whose boxes no wrapper proxy filters"
)

// proxyPlans covers every egress and metadata probe (egress_proxypath_test.go
// checks it against the catalog).
var proxyPlans = map[string]proxyPlan{
	"metadata.aws-imdsv1":          {dests: httpDest(metadataHP, http.MethodGet, imdsCredsPath)},
	"metadata.aws-imdsv2":          {dests: httpDest(metadataHP, http.MethodPut, "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds: 60")},
	"metadata.gcp":                 {dests: httpDest(metadataHP, http.MethodGet, "/computeMetadata/v1/instance/service-accounts/default/token", "Metadata-Flavor: Google")},
	"metadata.azure":               {dests: httpDest(metadataHP, http.MethodGet, "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/", "Metadata: true")},
	"metadata.ip-encodings":        {dests: httpDest(metadataHP, http.MethodGet, imdsCredsPath)},
	"metadata.redirect":            {dests: httpDest(metadataHP, http.MethodGet, imdsCredsPath)},
	"metadata.dns-rebinding":       {dests: httpDest(metadataHP, http.MethodGet, imdsCredsPath)},
	"metadata.hostnames":           {dests: httpDest(metadataHP, http.MethodGet, imdsCredsPath)},
	"metadata.ecs-task-role":       {dests: httpDest(ecsHP, http.MethodGet, ecsGuessedPath)},
	"metadata.alibaba":             {dests: httpDest(alibabaHP, http.MethodGet, "/latest/meta-data/ram/security-credentials/")},
	"metadata.aws-imds-ipv6":       {dests: httpDest(metadata6HP, http.MethodPut, "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds: 60")},
	"metadata.k8s-service-account": {none: noProxyFiles},
	"metadata.k8s-api":             {none: noProxyTLS},
	"metadata.wrapper-proxy":       {none: noProxySelf},
	"egress.tcp-ports":             {dests: sinkPorts(outsideIP, egressTCPPorts...)},
	"egress.udp":                   {none: noProxyUDP},
	"egress.dns-exfil":             {none: noProxyUDP},
	"egress.dns-direct":            {none: noProxyDNS},
	"egress.dns-alt-port":          {none: noProxyDNS},
	"egress.dns-tcp":               {none: noProxyDNS},
	"egress.dot":                   {none: noProxyTLS},
	"egress.doh":                   {none: noProxyTLS},
	"egress.icmp":                  {none: noProxyICMP},
	"egress.raw-socket":            {none: noProxyICMP},
	"egress.packet-socket":         {none: noProxyICMP},
	"egress.package-mirror":        {dests: httpDest(mirrorHP, http.MethodGet, mirrorPath)},
	"egress.browser-proxy":         {dests: httpDest(mirrorHP, http.MethodGet, mirrorPath)},
	"egress.gateway-services":      {dests: sinkPorts(gatewayIP, 2375, 10250)},
	"egress.neighbour":             {dests: sinkPorts(neighbourIP, 8080, 2375)},
	"egress.websocket":             {dests: sinkPorts(outsideIP, 80)},
	"egress.ignore-proxy":          {dests: sinkPorts(outsideIP, 80)},
	"egress.connect-proxy":         {dests: sinkPorts(outsideIP, 443)},
	"egress.wrapper-proxy-ip":      {none: noProxySelf},
	"egress.tool-broker":           {dests: httpDest(brokerHP, http.MethodGet, "/")},
	"egress.broker-no-token":       {dests: httpDest(brokerHP, http.MethodGet, "/")},
	"egress.ipv6":                  {dests: sinkPorts(outside6IP, 80)},

	"egress.opensandbox-policy-api":      {none: noProxyOSB},
	"egress.opensandbox-no-policy":       {none: noProxyOSB},
	"egress.opensandbox-neighbour-execd": {none: noProxyOSB},
	"egress.opensandbox-ip-literal":      {none: noProxyOSB},
}

// pathOutcome is what one attempt through a route did.
type pathOutcome struct {
	route   proxyRoute
	dest    proxyDest
	outcome probes.Outcome // escaped: the destination answered through the route
	note    string
}

// withProxyPaths is the proxy half of an egress or metadata probe on a
// target whose wrapper filters through a proxy; direct is the probe's own
// result, kept whole when there is nothing to add.
func withProxyPaths(ctx context.Context, id string, p probes.Params, direct probes.Result) probes.Result {
	if !p.WrapperProxy || !strings.HasPrefix(id, "egress.") && !strings.HasPrefix(id, "metadata.") {
		return direct
	}
	e := ev(direct.Evidence)
	if e == nil {
		e = ev{}
	}
	direct.Evidence = e
	plan, ok := proxyPlans[id]
	switch {
	case !ok:
		e.set("paths", "direct: "+string(direct.Outcome)+"; no proxy plan")
		return direct
	case plan.none != "":
		e.set("paths", "direct: "+string(direct.Outcome)+"; no proxy path: "+plan.none)
		return direct
	}
	dests := plan.dests(p)
	if len(dests) == 0 {
		e.set("paths", "direct: "+string(direct.Outcome)+"; no proxy path: the harness named no destination")
		return direct
	}
	routes, skipped := boxRoutes(p)
	if len(skipped) > 0 {
		e.setList("proxy_skipped", skipped)
	}
	if len(routes) == 0 {
		e.set("paths", "direct: "+string(direct.Outcome)+"; no proxy the target declares is named in the box's environment")
		if direct.Outcome == probes.Escaped {
			return direct
		}
		direct.Outcome = probes.Inconclusive
		direct.Detail = "the target says its wrapper filters through a proxy, but the box's environment names none the target declares, so the proxy path was not tried; directly: " + direct.Detail
		return direct
	}
	outs := tryRoutes(ctx, p, id, routes, dests)
	return combinePaths(direct, routes, outs, e)
}

// tryRoutes makes every attempt at once (routes × destinations, a few
// dozen at most), each bounded by egressTimeout.
func tryRoutes(ctx context.Context, p probes.Params, id string, routes []proxyRoute, dests []proxyDest) []pathOutcome {
	ctx, cancel := context.WithTimeout(ctx, 2*egressTimeout)
	defer cancel()
	outs := make([]pathOutcome, 0, len(routes)*len(dests))
	for _, r := range routes {
		for _, d := range dests {
			outs = append(outs, pathOutcome{route: r, dest: d})
		}
	}
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].outcome, outs[i].note = tryRoute(ctx, p, id, outs[i].route, outs[i].dest)
		}()
	}
	wg.Wait()
	return outs
}

// tryRoute makes one attempt: escaped when the destination answered
// through the route, blocked when the proxy refused it (or could not be
// connected to at all), inconclusive otherwise.
func tryRoute(ctx context.Context, p probes.Params, id string, r proxyRoute, d proxyDest) (probes.Outcome, string) {
	attr := id + "/" + r.via
	bp := boxProxy{addr: r.addr}
	if r.user != "" {
		bp.auth = basicAuth(r.user, r.pass)
	}
	if r.via == viaGet {
		method, path, header := d.method, d.path, d.header
		if d.hello {
			method, path = http.MethodGet, "/"
		}
		st, body, err := proxyRequest(ctx, bp, method, d.addr, path, p, attr, header...)
		switch {
		case err != nil:
			return refusedOr(err)
		case st >= 200 && st < 300 && (d.hello && strings.HasPrefix(body, sinkReply) || !d.hello && strings.TrimSpace(body) != ""):
			return probes.Escaped, fmt.Sprintf("answered %d", st)
		case st >= 300:
			return probes.Blocked, fmt.Sprintf("proxy answered %d", st)
		}
		return probes.Inconclusive, fmt.Sprintf("answered %d without the destination's reply", st)
	}
	var c net.Conn
	var br *bufio.Reader
	switch r.via {
	case viaConnect:
		pc, st, err := proxyTunnel(ctx, bp, d.addr, p, attr)
		if err != nil {
			return refusedOr(err)
		}
		if pc == nil {
			return probes.Blocked, fmt.Sprintf("CONNECT answered %d", st)
		}
		c, br = pc, pc.r
	case viaSocks5:
		sc, err := socks5Connect(ctx, r.addr, r.user, r.pass, d.addr)
		if err != nil {
			return refusedOr(err)
		}
		c, br = sc, bufio.NewReader(io.LimitReader(sc, 16<<10))
	default:
		return probes.Inconclusive, "unknown route " + r.via
	}
	defer c.Close()
	if d.hello {
		if _, err := io.WriteString(c, sinkHello+headerSafe(p.Token)+"/"+attr+"\n"); err != nil {
			return probes.Inconclusive, "tunnel open, sending failed: " + err.Error()
		}
		reply, err := br.ReadString('\n')
		if strings.HasPrefix(reply, sinkReply) {
			return probes.Escaped, "the sink answered through the tunnel"
		}
		return probes.Inconclusive, fmt.Sprintf("tunnel open, no sink reply (%v)", err)
	}
	tc := &proxyConn{Conn: c, r: br}
	if err := tc.request(boxProxy{}, d.method+" "+d.path, d.addr, p, attr, append(d.header, "Connection: close")...); err != nil {
		return probes.Inconclusive, "tunnel open, sending failed: " + err.Error()
	}
	st, _, err := tc.response(d.method)
	if err != nil {
		return probes.Inconclusive, "tunnel open, no HTTP answer: " + err.Error()
	}
	return probes.Escaped, fmt.Sprintf("answered %d through the tunnel", st)
}

// refusedOr reads a failed attempt: a proxy's clear refusal, or a proxy
// that could not be connected to (nothing listens: nothing went through
// it), is blocked; a timeout or a broken exchange is inconclusive.
func refusedOr(err error) (probes.Outcome, string) {
	var sr *socksRefusal
	var op *net.OpError
	if errors.As(err, &sr) || errors.As(err, &op) && op.Op == "dial" && !op.Timeout() {
		return probes.Blocked, err.Error()
	}
	return probes.Inconclusive, err.Error()
}

// proxyRequest sends method http://target/path to an HTTP proxy in
// absolute form (proxyGet's, with any method) and reads its answer.
func proxyRequest(ctx context.Context, bp boxProxy, method, target, path string, p probes.Params, attr string, extra ...string) (int, string, error) {
	c, err := dialBoxProxy(ctx, bp)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if err := c.request(bp, method+" http://"+target+path, target, p, attr, append(extra, "Connection: close", "Content-Length: 0")...); err != nil {
		return 0, "", fmt.Errorf("sending the request to the proxy: %w", err)
	}
	st, body, err := c.response(method)
	if err != nil {
		return 0, "", fmt.Errorf("reading the proxy's answer: %w", err)
	}
	return st, body, nil
}

// combinePaths joins the direct result and the proxy attempts: the
// direct escape stands; a route that reached its destination makes the
// result inconclusive for the canary to settle; every route refused
// leaves the direct outcome; a route that gave no clear answer makes a
// blocked direct result inconclusive.
func combinePaths(direct probes.Result, routes []proxyRoute, outs []pathOutcome, e ev) probes.Result {
	paths := []string{"direct: " + string(direct.Outcome)}
	var reached, unclear []string
	for _, r := range routes {
		o := probes.Blocked
		for _, a := range outs {
			if a.route.via != r.via || a.route.addr != r.addr {
				continue
			}
			switch a.outcome {
			case probes.Escaped:
				o = probes.Escaped
				reached = append(reached, r.via+" "+r.addr+" -> "+a.dest.addr+" ("+a.note+")")
			case probes.Inconclusive:
				if o != probes.Escaped {
					o = probes.Inconclusive
				}
				unclear = append(unclear, r.via+" "+r.addr+" -> "+a.dest.addr+": "+a.note)
			}
		}
		word := map[probes.Outcome]string{probes.Escaped: "reached", probes.Blocked: "refused", probes.Inconclusive: "unclear"}[o]
		paths = append(paths, r.String()+": "+word)
	}
	e.set("paths", strings.Join(paths, "; "))
	if len(reached) > 0 {
		e.setList("proxy_reached", reached)
	}
	if len(unclear) > 0 {
		e.setList("proxy_unclear", unclear)
	}
	switch {
	case direct.Outcome == probes.Escaped:
		return direct
	case len(reached) > 0:
		direct.Outcome = probes.Inconclusive
		direct.Detail = fmt.Sprintf("the destination answered through the wrapper's proxy (%s): an escape through a proxy counts only where the harness canary's record confirms it; directly: %s",
			strings.Join(reached, "; "), direct.Detail)
	case len(unclear) > 0 && direct.Outcome == probes.Blocked:
		direct.Outcome = probes.Inconclusive
		direct.Detail = "blocked directly, but a path through the wrapper's proxy gave no clear answer (" + strings.Join(unclear, "; ") + "); directly: " + direct.Detail
	case direct.Outcome == probes.Blocked:
		direct.Detail += fmt.Sprintf("; every path through the wrapper's proxies (%d) was refused", len(routes))
	}
	return direct
}
