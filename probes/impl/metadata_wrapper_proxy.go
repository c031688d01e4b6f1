package impl

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// The metadata service through a wrapper's own filtering proxy; the proxy
// helpers (findBoxProxy, proxyGet, proxyTunnel) are egress_wrapper_proxy.go's.

func init() {
	register(map[string]Func{
		"metadata.wrapper-proxy": wrapperProxyMetadata,
	})
}

// wrapperProxyMetadata asks the box's proxy for the AWS role credentials
// path on the metadata address (169.254.169.254, an IP literal of the
// link-local range srt names in NO_PROXY but hostile code need not honour):
// a GET, then a CONNECT tunnel carrying the same GET.
func wrapperProxyMetadata(ctx context.Context, p probes.Params) probes.Result {
	const probe = "metadata.wrapper-proxy"
	e := ev{}
	bp, err := findBoxProxy(p, e)
	if err != nil {
		return noBoxProxy(p, err, e)
	}
	md := metadataAddr(p.MetadataAddr)
	e.set("addr", md)
	st, body, getErr := proxyGet(ctx, bp, md, imdsCredsPath, p, probe)
	if getErr != nil {
		e.setErr("get_", getErr)
	} else {
		e.setInt("get_status", st)
		if st == http.StatusOK && strings.TrimSpace(body) != "" {
			e.set("body", clip(body, 100))
			return escaped("the wrapper's proxy relayed a GET of the metadata address ("+md+") and it answered with role names", e)
		}
	}
	c, cst, tunErr := proxyTunnel(ctx, bp, md, p, probe)
	switch {
	case tunErr != nil:
		e.setErr("connect_", tunErr)
	case c == nil:
		e.setInt("connect_status", cst)
	default:
		defer c.Close()
		e.setInt("connect_status", cst)
		if err := c.request(bp, "GET "+imdsCredsPath, md, p, probe, "Connection: close"); err != nil {
			e.setErr("tunnel_", err)
			return inconclusive("the wrapper's proxy opened a tunnel to the metadata address, but nothing could be sent through it", e)
		}
		tst, _, err := c.response(http.MethodGet)
		if err != nil {
			e.setErr("tunnel_", err)
			return inconclusive("the wrapper's proxy opened a tunnel to the metadata address, but no HTTP answer came through it; the host canary decides", e)
		}
		e.setInt("tunnel_status", tst)
		return escaped(fmt.Sprintf("the wrapper's proxy tunnelled to the metadata address (%s), which answered HTTP %d through it", md, tst), e)
	}
	return proxyRefused("the metadata address", getErr, st, tunErr, cst, e)
}
