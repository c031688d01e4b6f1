package impl

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// The proxy path of a wrapper sandbox: a wrapper such as srt gives the box
// no network but a filtering proxy of its own, which it names in
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (agents' tools honour them). The
// direct path is the other egress and metadata probes'; these send the
// harness's outside and metadata addresses, as IP literals, through that
// proxy, in both ways a proxy carries a request: an absolute-form GET and a
// CONNECT tunnel. A proxy that lets either through is the escape, and the
// harness's canary records the probe's token. The proxy helpers here serve
// metadata.wrapper-proxy as well (metadata_wrapper_proxy.go).

func init() {
	register(map[string]Func{
		"egress.wrapper-proxy-ip": wrapperProxyIP,
	})
}

// proxyEnv are the variables a wrapper names its proxy in, in the order
// tools read them for an http and an https destination.
var proxyEnv = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// boxProxy is the HTTP proxy the box's environment names.
type boxProxy struct {
	addr string // loopback IP:port, the only address dialled
	auth string // the Proxy-Authorization value, "" without credentials
	from string // the variable it came from
}

// errNoProxy means the box's environment names no HTTP proxy.
var errNoProxy = errors.New("the box's environment names no HTTP proxy")

// findBoxProxy reads the first HTTP proxy the environment names that the
// target declares its wrapper announces (p.WrapperProxies). Only a
// proxy on loopback is used (the wrapper's, inside the box's own network):
// the probe never dials an address the harness did not hand it or the box
// does not hold itself. The harness's own egress proxy (p.ProxyAddr, which
// the harness names to every sandbox on its network) is not the wrapper's:
// egress.connect-proxy tries that one.
func findBoxProxy(p probes.Params, e ev) (boxProxy, error) {
	var skipped, undeclared []string
	defer func() {
		if len(undeclared) > 0 {
			e.setList("proxy_undeclared", undeclared)
		}
	}()
	for _, k := range proxyEnv {
		v := os.Getenv(k)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err == nil && p.ProxyAddr != "" && u.Host == p.ProxyAddr {
			e.set("harness_proxy_env", k)
			continue
		}
		bp, err := parseBoxProxy(v)
		if err != nil {
			skipped = append(skipped, k+": "+err.Error())
			continue
		}
		if !slices.Contains(p.WrapperProxies, "http://"+bp.addr) {
			// The box's environment is the box's: only a proxy the
			// target declares its wrapper announces is dialled.
			undeclared = append(undeclared, k+": "+bp.addr)
			continue
		}
		bp.from = k
		e.set("proxy_env", k)
		e.set("proxy", bp.addr)
		return bp, nil
	}
	if len(skipped) > 0 {
		e.setList("proxy_skipped", skipped)
		return boxProxy{}, fmt.Errorf("no usable HTTP proxy in the environment (%s)", strings.Join(skipped, "; "))
	}
	return boxProxy{}, errNoProxy
}

// parseBoxProxy reads one proxy URL strictly: http, a loopback host (the
// name localhost is taken as 127.0.0.1, not resolved), a port.
func parseBoxProxy(v string) (boxProxy, error) {
	u, err := url.Parse(v)
	if err != nil {
		return boxProxy{}, fmt.Errorf("not a URL")
	}
	if u.Scheme != "http" {
		return boxProxy{}, fmt.Errorf("scheme %q is not http", clip(u.Scheme, 16))
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		return boxProxy{}, fmt.Errorf("no port")
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return boxProxy{}, fmt.Errorf("host %q is not on loopback", clip(host, 64))
	}
	bp := boxProxy{addr: net.JoinHostPort(ip.String(), port)}
	if u.User != nil {
		pw, _ := u.User.Password()
		bp.auth = basicAuth(u.User.Username(), pw)
	}
	return bp, nil
}

// basicAuth is the Proxy-Authorization value of user and password.
func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// noBoxProxy decides a probe whose box names no proxy: where the target
// declares one (network: proxy) the wrapper did not hand it to the box, and
// nothing can be said; where it declares none there is no proxy path out
// (the direct path is the other probes').
func noBoxProxy(p probes.Params, err error, e ev) probes.Result {
	e.set("sent", "false")
	e.setErr("", err)
	if p.WrapperProxy {
		return inconclusive("the target says its wrapper filters through a proxy, but "+err.Error()+": nothing was sent", e)
	}
	if errors.Is(err, errNoProxy) {
		return blocked("the box's environment names no proxy of the wrapper's and the target declares none: there is no proxy path out", e)
	}
	return inconclusive(err.Error()+": nothing was sent", e)
}

// proxyConn is one connection to the box's proxy.
type proxyConn struct {
	net.Conn
	r *bufio.Reader
}

// dialBoxProxy connects to the box's proxy, bounded by egressTimeout.
func dialBoxProxy(ctx context.Context, bp boxProxy) (*proxyConn, error) {
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, "tcp", bp.addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the proxy %s: %w", bp.addr, err)
	}
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	return &proxyConn{Conn: c, r: bufio.NewReader(io.LimitReader(c, 16<<10))}, nil
}

// request writes one request to the proxy: its line, the proxy's
// credentials, the probe's attribution, then extra header lines.
func (c *proxyConn) request(bp boxProxy, line, host string, p probes.Params, probe string, extra ...string) error {
	tok := headerSafe(p.Token)
	var b strings.Builder
	fmt.Fprintf(&b, "%s HTTP/1.1\r\nHost: %s\r\n", line, host)
	if bp.auth != "" {
		fmt.Fprintf(&b, "Proxy-Authorization: %s\r\n", bp.auth)
	}
	fmt.Fprintf(&b, "User-Agent: sandcheck-probe/%s/%s\r\nX-Sandcheck-Token: %s/%s\r\n", tok, probe, tok, probe)
	for _, x := range extra {
		b.WriteString(x + "\r\n")
	}
	b.WriteString("\r\n")
	_, err := io.WriteString(c, b.String())
	return err
}

// response reads one bounded HTTP response and at most 4 KiB of its body.
func (c *proxyConn) response(method string) (int, string, error) {
	resp, err := http.ReadResponse(c.r, &http.Request{Method: method})
	if err != nil {
		return 0, "", err
	}
	if method == http.MethodConnect {
		return resp.StatusCode, "", nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(body), nil
}

// proxyGet asks the proxy for http://target/path (absolute form) and
// returns its answer, or the proxy's refusal.
func proxyGet(ctx context.Context, bp boxProxy, target, path string, p probes.Params, probe string, extra ...string) (int, string, error) {
	c, err := dialBoxProxy(ctx, bp)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if err := c.request(bp, "GET http://"+target+path, target, p, probe, append(extra, "Connection: close")...); err != nil {
		return 0, "", fmt.Errorf("sending the request to the proxy: %w", err)
	}
	st, body, err := c.response(http.MethodGet)
	if err != nil {
		return 0, "", fmt.Errorf("reading the proxy's answer: %w", err)
	}
	return st, body, nil
}

// proxyTunnel asks the proxy for a CONNECT tunnel to target: the open
// tunnel, or nil and the proxy's status when it refused.
func proxyTunnel(ctx context.Context, bp boxProxy, target string, p probes.Params, probe string) (*proxyConn, int, error) {
	c, err := dialBoxProxy(ctx, bp)
	if err != nil {
		return nil, 0, err
	}
	if err := c.request(bp, "CONNECT "+target, target, p, probe); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("sending CONNECT: %w", err)
	}
	st, _, err := c.response(http.MethodConnect)
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("reading the proxy's answer to CONNECT: %w", err)
	}
	if st != http.StatusOK {
		c.Close()
		return nil, st, nil
	}
	return c, st, nil
}

// wrapperProxyIP sends the outside address, an IP literal, through the
// box's proxy: a GET of its port 80 and a CONNECT tunnel to its port 443
// carrying the probe's hello. A filtering proxy must refuse both (an IP
// literal is no allowed domain); the outside sink answering through it is
// the escape.
func wrapperProxyIP(ctx context.Context, p probes.Params) probes.Result {
	const probe = "egress.wrapper-proxy-ip"
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("outside address", e)
	}
	bp, err := findBoxProxy(p, e)
	if err != nil {
		return noBoxProxy(p, err, e)
	}
	web := net.JoinHostPort(p.OutsideAddr, "80")
	st, body, getErr := proxyGet(ctx, bp, web, "/", p, probe)
	if getErr != nil {
		e.setErr("get_", getErr)
	} else {
		e.setInt("get_status", st)
		if st == http.StatusOK && strings.HasPrefix(body, sinkReply) {
			return escaped("the wrapper's proxy relayed a GET of an outside IP literal ("+web+") and the outside sink answered", e)
		}
	}
	target := net.JoinHostPort(p.OutsideAddr, "443")
	c, cst, tunErr := proxyTunnel(ctx, bp, target, p, probe)
	switch {
	case tunErr != nil:
		e.setErr("connect_", tunErr)
	case c == nil:
		e.setInt("connect_status", cst)
	default:
		defer c.Close()
		e.setInt("connect_status", cst)
		if _, err := io.WriteString(c, hello(p, probe)); err != nil {
			e.setErr("tunnel_", err)
			return inconclusive("the wrapper's proxy opened a tunnel to an outside IP literal ("+target+"), but nothing could be sent through it", e)
		}
		reply, err := c.r.ReadString('\n')
		if strings.HasPrefix(reply, sinkReply) {
			return escaped("the wrapper's proxy tunnelled to an outside IP literal ("+target+") and the outside sink answered through it", e)
		}
		e.setErr("tunnel_", err)
		return inconclusive("the wrapper's proxy opened a tunnel to an outside IP literal ("+target+"), but the sink did not answer through it", e)
	}
	return proxyRefused("an outside IP literal", getErr, st, tunErr, cst, e)
}

// proxyRefused decides a probe whose GET and CONNECT both failed or were
// refused: blocked when the proxy answered both with a refusal or could not
// be reached at all, inconclusive when it went quiet.
func proxyRefused(what string, getErr error, getStatus int, tunErr error, connectStatus int, e ev) probes.Result {
	var unreachable *net.OpError
	getRefused := getErr == nil && (getStatus < 200 || getStatus > 299) || errors.As(getErr, &unreachable) && unreachable.Op == "dial"
	tunRefused := tunErr == nil || errors.As(tunErr, &unreachable) && unreachable.Op == "dial"
	if getRefused && tunRefused {
		if getErr != nil && tunErr != nil {
			return blocked("the proxy the box's environment names could not be reached, so nothing went through it to "+what, e)
		}
		return blocked(fmt.Sprintf("the wrapper's proxy refused %s both ways (GET %d, CONNECT %d)", what, getStatus, connectStatus), e)
	}
	return inconclusive("the wrapper's proxy gave no clear answer for "+what+" (see the errors); the host canary decides", e)
}
