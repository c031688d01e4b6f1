package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// Browsing, the workload of a mediated-browser profile: the task navigates
// an approved site through the browser proxy the platform puts in front of
// it, one tunnel per page as a browser opens them.
func init() {
	register(map[string]Func{"workload.browse-approved-site": workloadBrowse})
}

// browsePages are the pages of the approved site (the harness's package
// mirror, the one destination its proxy allows) the workflow loads, in
// order: a landing page and the page it links to.
var browsePages = []string{"/", mirrorPath}

// workloadBrowse loads each page through the configured proxy: a CONNECT
// tunnel to the approved site carrying the probe's token to the proxy, then
// a GET through it. Escaped means every page came back from the site.
func workloadBrowse(ctx context.Context, p probes.Params) probes.Result {
	const probe = "workload.browse-approved-site"
	e := ev{}
	if p.ProxyAddr == "" || p.MirrorAddr == "" {
		return noAddress("proxy and approved site", e)
	}
	envProxy(e)
	e.set("server", p.ProxyAddr)
	for i, page := range browsePages {
		status, err := browsePage(ctx, p, probe, page)
		e.setInt("page", i+1)
		if err != nil {
			e.setErr("", err)
			if status == 0 {
				return blocked("the proxy could not be used", e)
			}
			return inconclusive(fmt.Sprintf("the proxy tunnelled to the approved site, but page %s did not load", page), e)
		}
		if status != http.StatusOK {
			e.setInt("status", status)
			return blocked(fmt.Sprintf("the proxy refused to tunnel to the approved site (%d)", status), e)
		}
	}
	e.setInt("pages", len(browsePages))
	return escaped(fmt.Sprintf("loaded %d pages of the approved site through the browser proxy", len(browsePages)), e)
}

// browsePage opens a tunnel through the proxy to the approved site and gets
// one page. It returns the proxy's CONNECT status (0 when the proxy could
// not be reached) and an error when the page did not come back from the
// site.
func browsePage(ctx context.Context, p probes.Params, probe, page string) (int, error) {
	c, status, err := proxyConnect(ctx, p, p.MirrorAddr, probe, true)
	if err != nil {
		return 0, err
	}
	if c == nil {
		return status, nil
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sandcheck-browser\r\nConnection: close\r\n\r\n", page, p.MirrorAddr); err != nil {
		return status, fmt.Errorf("sending the page request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 4<<10)), nil)
	if err != nil {
		return status, fmt.Errorf("reading the page: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), sinkReply+mirrorRole) {
		return status, fmt.Errorf("page %s: HTTP %d %q, not the approved site", page, resp.StatusCode, clip(string(body), 60))
	}
	return status, nil
}
