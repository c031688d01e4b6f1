package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.ignore-proxy":  ignoreProxy,
		"egress.connect-proxy": connectProxy,
		"egress.browser-proxy": browserProxy,
	})
}

// envProxy records which proxy the box's environment names.
func envProxy(e ev) {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if v := os.Getenv(k); v != "" {
			e.set("env_proxy", clip(v, 100))
			return
		}
	}
	e.set("env_proxy", "")
}

// ignoreProxy makes a plain HTTP request straight to the outside address
// although the environment names a proxy: hostile code does not have to
// honour HTTP_PROXY, so a proxy is a control only if direct egress is also
// denied.
func ignoreProxy(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.ProxyAddr == "" || p.OutsideAddr == "" {
		return noAddress("proxy and outside address", e)
	}
	envProxy(e)
	addr := net.JoinHostPort(p.OutsideAddr, "80")
	e.set("addr", addr)
	status, body, connected, err := directGet(ctx, addr, "/", p, "egress.ignore-proxy")
	if err != nil {
		e.setErr("", err)
		if connected {
			return inconclusive("a direct connection to the outside address opened, but no answer came", e)
		}
		return blocked("no direct connection to the outside address could be made; only the proxy is a way out", e)
	}
	e.setInt("status", status)
	if status == http.StatusOK && strings.HasPrefix(body, sinkReply) {
		return escaped("the outside address answered a direct request made past the configured proxy", e)
	}
	return inconclusive("something answered at the outside address, but not the harness's sink", e)
}

// directGet GETs path from addr without any proxy, with the probe's token.
func directGet(ctx context.Context, addr, path string, p probes.Params, probe string) (int, string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, egressTimeout)
	defer cancel()
	d := net.Dialer{Timeout: egressTimeout}
	connected := false
	cl := &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := d.DialContext(ctx, "tcp4", addr)
				connected = connected || err == nil
				return c, err
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       egressTimeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", false, err
	}
	tok := headerSafe(p.Token)
	req.Header.Set("User-Agent", "sandcheck-probe/"+tok+"/"+probe)
	req.Header.Set("X-Sandcheck-Token", tok+"/"+probe)
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", connected, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	return resp.StatusCode, string(b), true, nil
}

// proxyConnect opens a CONNECT tunnel to target through the proxy, the
// token in the request's headers when withToken. It returns the tunnel, or
// the proxy's status when it refused.
func proxyConnect(ctx context.Context, p probes.Params, target, probe string, withToken bool) (net.Conn, int, error) {
	d := net.Dialer{Timeout: egressTimeout}
	c, err := d.DialContext(ctx, "tcp4", p.ProxyAddr)
	if err != nil {
		return nil, 0, fmt.Errorf("connecting to the proxy: %w", err)
	}
	deadline := time.Now().Add(egressTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	tok := ""
	if withToken {
		tok = "X-Sandcheck-Token: " + headerSafe(p.Token) + "/" + probe + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, tok); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("sending CONNECT: %w", err)
	}
	br := bufio.NewReader(io.LimitReader(c, 4<<10))
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("reading the proxy's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, resp.StatusCode, nil
	}
	return c, http.StatusOK, nil
}

// connectProxy asks the configured proxy for a CONNECT tunnel to the
// outside address's port 443, a destination no profile allows, and sends
// its hello through. An allowlist proxy must refuse; a tunnel that carries
// the hello to the outside sink is the escape.
func connectProxy(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.ProxyAddr == "" || p.OutsideAddr == "" {
		return noAddress("proxy and outside address", e)
	}
	envProxy(e)
	target := net.JoinHostPort(p.OutsideAddr, "443")
	e.set("server", p.ProxyAddr)
	e.set("addr", target)
	c, status, err := proxyConnect(ctx, p, target, "egress.connect-proxy", true)
	if err != nil {
		e.setErr("", err)
		return blocked("the proxy could not be used", e)
	}
	e.setInt("status", status)
	if c == nil {
		return blocked(fmt.Sprintf("the proxy refused to tunnel to a denied destination (%d)", status), e)
	}
	defer c.Close()
	if _, err := io.WriteString(c, hello(p, "egress.connect-proxy")); err != nil {
		e.setErr("", err)
		return inconclusive("the proxy opened a tunnel, but nothing could be sent through it", e)
	}
	reply, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	if strings.HasPrefix(reply, sinkReply) {
		return escaped("the proxy tunnelled to a destination no profile allows and the outside sink answered through it", e)
	}
	e.setErr("", err)
	return inconclusive("the proxy opened a tunnel, but the outside sink did not answer through it", e)
}

// browserProxy fetches the package mirror's index through the configured
// proxy, the way a mediated browser reaches an approved site. It is the
// workload of a mediated-browser profile (expected "escaped" there) and
// egress for every profile without a proxy. The token goes to the proxy
// only, so the host sees the proxy, not the mirror, as the destination.
func browserProxy(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.ProxyAddr == "" || p.MirrorAddr == "" {
		return noAddress("proxy and mirror", e)
	}
	envProxy(e)
	e.set("server", p.ProxyAddr)
	c, status, err := proxyConnect(ctx, p, p.MirrorAddr, "egress.browser-proxy", true)
	if err != nil {
		e.setErr("", err)
		return blocked("the proxy could not be used", e)
	}
	e.setInt("status", status)
	if c == nil {
		return blocked(fmt.Sprintf("the proxy refused to tunnel to the mirror (%d)", status), e)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", mirrorPath, p.MirrorAddr); err != nil {
		e.setErr("", err)
		return inconclusive("the proxy opened a tunnel, but nothing could be sent through it", e)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 4<<10)), nil)
	if err != nil {
		e.setErr("", err)
		return inconclusive("the proxy opened a tunnel to the mirror, but no answer came through it", e)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	e.setInt("mirror_status", resp.StatusCode)
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), sinkReply+mirrorRole) {
		return escaped("the package mirror answered through the proxy", e)
	}
	return inconclusive("something answered through the proxy, but not the harness's mirror", e)
}
