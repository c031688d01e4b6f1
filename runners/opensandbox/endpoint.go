package opensandbox

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// execdEndpoint is execd's endpoint as the lifecycle API names it, made a
// base URL the runner calls execd under.
type execdEndpoint struct {
	// base is the URL execd's paths are appended to: a scheme, the host,
	// and any path the platform put before them (upstream's bridge mode
	// answers {host}:{port}/proxy/44772, server networking.py 269).
	base string
	// scheme is base's scheme.
	scheme string
	// hostPort is the endpoint's host and port as written.
	hostPort string
	// addr is hostPort as an address when it is an IP literal (zero when it
	// is a host name).
	addr netip.AddrPort
	// direct says base reaches execd itself: no path, or execd's own proxy
	// to its own port (/proxy/44772), which the same host:port answers
	// without (the published port is execd's).
	direct bool
}

// parseEndpoint reads an endpoint in any form upstream gives: bare
// (host:port, its host network mode), with execd's proxy path
// (host:port/proxy/44772, its bridge mode), or a full http(s) URL (a TLS
// ingress). A form without a scheme takes scheme, the lifecycle URL's, as
// the official SDK takes its configured protocol (sdks/sandbox/go
// sandbox.go 418-421).
func parseEndpoint(ep, scheme string) (execdEndpoint, error) {
	raw := strings.TrimSpace(ep)
	if !strings.Contains(raw, "://") {
		raw = scheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return execdEndpoint{}, fmt.Errorf("execd endpoint %q: %w", ep, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return execdEndpoint{}, fmt.Errorf("execd endpoint %q is not an http(s) host[:port][/path]", ep)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	e := execdEndpoint{base: u.Scheme + "://" + u.Host + path, scheme: u.Scheme, hostPort: u.Host,
		direct: path == "" || path == "/proxy/"+strconv.Itoa(ExecdPort)}
	if ap, err := netip.ParseAddrPort(u.Host); err == nil {
		e.addr = ap
	}
	return e, nil
}

// schemeOf is the scheme of the lifecycle URL ("http" when it names none).
func schemeOf(base string) string {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return u.Scheme
	}
	return "http"
}
