package impl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
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
		"privilege.opensandbox-execd-unauthenticated": osbExecdUnauthenticated,
		"egress.opensandbox-policy-api":               osbPolicyAPI,
		"egress.opensandbox-no-policy":                osbNoPolicy,
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

// osbExecdUnauthenticated asks the sandbox's own execd, without any token,
// to run a command that echoes the probe's token. Upstream starts execd
// without a token by default: then anything in the box (a task running as
// an unprivileged user too) drives the platform's root agent. When execd
// wants a token, the probe looks for it where the box can read it and
// tries again with it.
func osbExecdUnauthenticated(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	body, _ := json.Marshal(map[string]string{"command": "echo " + p.Token})
	status, text, refused, err := osbDo(ctx, http.MethodPost, "http://"+osbExecdAddr+"/command", string(body))
	if refused {
		return notOpenSandbox(e)
	}
	if err != nil {
		e.setErr("", err)
		return inconclusive("execd on "+osbExecdAddr+" did not answer the command", e)
	}
	e.setInt("status", status)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return osbExecdWithFoundToken(ctx, p, e, string(body), status)
	case status == http.StatusOK && strings.Contains(text, `"text":"`+p.Token+`"`):
		e.set("ran", "echo <token>")
		return escaped("execd ran a command for code inside the sandbox without any token (its control plane is open to the task)", e)
	}
	e.set("answer", osbLine(text))
	return inconclusive(fmt.Sprintf("execd answered %d without running the command", status), e)
}

// osbExecdWithFoundToken looks for execd's access token where code in the
// box can read it (its own environment, every readable process's
// environment and command line) and, when found, retries the command with
// it: a token the task can read protects nothing. The token itself is never
// recorded, only where it was found.
func osbExecdWithFoundToken(ctx context.Context, p probes.Params, e ev, body string, status int) probes.Result {
	token, where := osbFindToken()
	if token == "" {
		e.set("token_found", "no")
		return blocked(fmt.Sprintf("execd refused a command without its access token (%d), and the token is nowhere the sandbox can read", status), e)
	}
	e.set("token_found_in", where)
	ctx, cancel := context.WithTimeout(ctx, osbTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+osbExecdAddr+"/command", strings.NewReader(body))
	if err != nil {
		e.setErr("", err)
		return inconclusive("building the request", e)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-EXECD-ACCESS-TOKEN", token)
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		e.setErr("retry_", err)
		return inconclusive("execd did not answer the retry with the found token", e)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, osbMaxBody))
	e.setInt("retry_status", resp.StatusCode)
	if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"text":"`+p.Token+`"`) {
		return escaped("execd wants an access token, but the token is readable inside the sandbox ("+where+") and execd ran a command with it", e)
	}
	return blocked(fmt.Sprintf("execd refused a command without its token (%d) and with the token found in %s (%d)", status, where, resp.StatusCode), e)
}

// osbFindToken looks for EXECD_ACCESS_TOKEN in the probe's environment and
// in every readable process's environment, and for --access-token in every
// readable command line; it returns the token and where it was.
func osbFindToken() (token, where string) {
	if v := os.Getenv("EXECD_ACCESS_TOKEN"); v != "" {
		return v, "the task's own environment"
	}
	ents, _ := os.ReadDir("/proc")
	for i, ent := range ents {
		if i > 4096 {
			break
		}
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		if b, err := readCapped("/proc/"+ent.Name()+"/environ", 1<<16); err == nil {
			for _, kv := range strings.Split(string(b), "\x00") {
				if v, ok := strings.CutPrefix(kv, "EXECD_ACCESS_TOKEN="); ok && v != "" {
					return v, "the environment of pid " + ent.Name()
				}
			}
		}
		if b, err := readCapped("/proc/"+ent.Name()+"/cmdline", 1<<16); err == nil {
			args := strings.Split(string(b), "\x00")
			for j, a := range args {
				for _, flag := range []string{"--access-token=", "-access-token="} {
					if v, ok := strings.CutPrefix(a, flag); ok && v != "" {
						return v, "the command line of pid " + ent.Name()
					}
				}
				if (a == "--access-token" || a == "-access-token") && j+1 < len(args) && args[j+1] != "" {
					return args[j+1], "the command line of pid " + ent.Name()
				}
			}
		}
	}
	return "", ""
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
