package impl

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"egress.package-mirror": packageMirror})
}

// mirrorRole is the role the harness's package mirror names in its reply
// (netharness.RolePackageMirror).
const mirrorRole = "package-mirror"

// mirrorPath is what a package manager would fetch first from a mirror (a
// PyPI-style simple index); the harness's mirror answers any path.
const mirrorPath = "/simple/"

// packageMirror fetches the index of the package mirror the harness named.
// Reaching it is the workload a package-build sandbox must be able to do
// (expected "escaped" there) and an egress path for every profile that grants
// no mirror (expected "blocked"). It goes straight to the given address: no
// proxy from the environment, no redirect followed.
func packageMirror(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.MirrorAddr == "" {
		return noAddress("package mirror", e)
	}
	e.set("addr", p.MirrorAddr)
	ctx, cancel := context.WithTimeout(ctx, egressTimeout)
	defer cancel()
	connected := false
	d := net.Dialer{Timeout: egressTimeout}
	cl := &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, netw, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, "tcp4", p.MirrorAddr)
				connected = connected || err == nil
				return c, err
			},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: egressTimeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       egressTimeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.MirrorAddr+mirrorPath, nil)
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the request to the package mirror", e)
	}
	tok := headerSafe(p.Token)
	req.Header.Set("User-Agent", "sandcheck-probe/"+tok+"/egress.package-mirror")
	req.Header.Set("X-Sandcheck-Token", tok+"/egress.package-mirror")
	start := time.Now()
	resp, err := cl.Do(req)
	e.setf("seconds", "%.2f", time.Since(start).Seconds())
	if err != nil {
		e.setErr("", err)
		var ne net.Error
		if connected && !(errors.As(err, &ne) && ne.Timeout()) {
			return inconclusive("a connection to the package mirror opened but no answer came back", e)
		}
		if connected {
			return inconclusive("a connection to the package mirror opened but the answer timed out", e)
		}
		return blocked("no connection to the package mirror could be made", e)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	e.setInt("status", resp.StatusCode)
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), sinkReply+mirrorRole) {
		return escaped("the package mirror answered the index request", e)
	}
	e.set("reply", string(body))
	return inconclusive("something answered at the package mirror's address, but not as the harness's mirror", e)
}
