package impl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// OpenSandbox's in-box daemons, on the sandbox's own loopback: execd (the
// platform's command and file agent, root) and the egress sidecar's policy
// API (in the sandbox's network namespace when the sandbox has a policy).
const (
	osbExecdAddr  = "127.0.0.1:44772"
	osbEgressAddr = "127.0.0.1:18080"
	osbTimeout    = 5 * time.Second
	osbMaxBody    = 64 << 10
)

func init() {
	register(map[string]Func{
		"egress.opensandbox-policy-api": osbPolicyAPI,
		"egress.opensandbox-no-policy":  osbNoPolicy,
	})
}

// osbDo sends one request to a loopback daemon with no credentials and
// returns its status and (bounded) body; refused reports that nothing
// listens there.
func osbDo(ctx context.Context, method, url, body string) (status int, text string, refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, osbTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", false, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cli := &http.Client{Transport: &http.Transport{Proxy: nil}} // loopback, never through a proxy
	resp, err := cli.Do(req)
	if err != nil {
		return 0, "", errors.Is(err, syscall.ECONNREFUSED), err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, osbMaxBody))
	return resp.StatusCode, string(b), false, nil
}

// osbInBox reports whether the probe runs in an OpenSandbox sandbox: execd
// answers on loopback (with any status: it may want a token).
func osbInBox(ctx context.Context, e ev) bool {
	status, _, _, err := osbDo(ctx, http.MethodGet, "http://"+osbExecdAddr+"/ping", "")
	if err != nil {
		e.setErr("execd_ping_", err)
		return false
	}
	e.setInt("execd_ping_status", status)
	return true
}

func notOpenSandbox(e ev) probes.Result {
	return result(probes.NotApplicable, "no OpenSandbox execd answers on "+osbExecdAddr+": not an OpenSandbox sandbox", e)
}

// readCapped reads at most n bytes of a file.
func readCapped(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// osbPolicyAPI reads the egress sidecar's policy API without its token
// (OPENSANDBOX-EGRESS-AUTH): upstream must answer 401 to the box.
func osbPolicyAPI(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if !osbInBox(ctx, e) {
		return notOpenSandbox(e)
	}
	status, text, refused, err := osbDo(ctx, http.MethodGet, "http://"+osbEgressAddr+"/policy", "")
	if refused {
		return result(probes.NotApplicable, "no egress sidecar on "+osbEgressAddr+": the sandbox has no network policy (see egress.opensandbox-no-policy)", e)
	}
	if err != nil {
		e.setErr("", err)
		return inconclusive("the policy API did not answer", e)
	}
	e.setInt("status", status)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return blocked(fmt.Sprintf("the egress policy API refused a call without its token (%d)", status), e)
	case status >= 200 && status < 300:
		e.set("answer", osbLine(text))
		return escaped("the egress policy API answered without its token: code in the box can read and rewrite its own egress policy", e)
	}
	return inconclusive(fmt.Sprintf("the egress policy API answered %d", status), e)
}

// osbNoPolicy checks whether an egress sidecar enforces a policy for the
// sandbox: upstream attaches one only when the create request carries a
// networkPolicy, so a sandbox without one has unrestricted egress.
func osbNoPolicy(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if !osbInBox(ctx, e) {
		return notOpenSandbox(e)
	}
	status, _, refused, err := osbDo(ctx, http.MethodGet, "http://"+osbEgressAddr+"/policy", "")
	if refused {
		e.set("egress_sidecar", "absent")
		return escaped("no egress sidecar listens on "+osbEgressAddr+": the sandbox was created without a network policy, which OpenSandbox takes as unrestricted egress", e)
	}
	if err != nil {
		e.setErr("", err)
		return inconclusive("the egress sidecar's port did not answer", e)
	}
	e.setInt("status", status)
	e.set("egress_sidecar", "present")
	return blocked("an egress sidecar enforces a network policy for the sandbox", e)
}

// osbLine is the first line of a daemon's answer, bounded.
func osbLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
