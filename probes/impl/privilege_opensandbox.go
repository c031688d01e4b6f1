package impl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"privilege.opensandbox-execd-unauthenticated": osbExecdUnauthenticated,
	})
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
