package impl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.opensandbox-neighbour-execd": osbNeighbourExecd,
	})
}

// osbNeighbourExecd asks a neighbour sandbox's execd (the address the
// platform's endpoint lookup gave the harness) to run a command that echoes
// the probe's token: first without a token, as upstream starts execd by
// default, then, when it wants one, with the token this box can read. A
// neighbour out of reach, or refusing both, holds.
func osbNeighbourExecd(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.NeighbourExecdAddr == "" {
		e.set("sent", "false")
		return inconclusive("the harness named no neighbour execd (no neighbour sandbox made through the platform); nothing was sent", e)
	}
	e.set("neighbour_execd", p.NeighbourExecdAddr)
	base, err := osbExecdBase(p.NeighbourExecdAddr)
	if err != nil {
		e.set("sent", "false")
		e.setErr("", err)
		return inconclusive("the harness named the neighbour's execd in a form this probe does not send to; nothing was sent", e)
	}
	body, _ := json.Marshal(map[string]string{"command": "echo " + p.Token})
	url := base + "/command"
	status, text, refused, err := osbDo(ctx, http.MethodPost, url, string(body))
	if err != nil {
		e.setErr("", err)
		if refused || osbUnreachable(err) {
			return blocked("the neighbour sandbox's execd on "+p.NeighbourExecdAddr+" is out of this box's reach", e)
		}
		return inconclusive("the neighbour's execd did not answer as HTTP", e)
	}
	e.setInt("status", status)
	switch {
	case status == http.StatusOK && strings.Contains(text, `"text":"`+p.Token+`"`):
		e.set("ran", "echo <token>")
		return escaped("the neighbour sandbox's execd ran a command for this box without any token: every tenant's root agent is open to its neighbours", e)
	case status != http.StatusUnauthorized && status != http.StatusForbidden:
		e.set("answer", osbLine(text))
		return inconclusive(fmt.Sprintf("the neighbour's execd answered %d without running the command", status), e)
	}
	token, where := osbFindToken()
	if token == "" {
		e.set("token_found", "no")
		return blocked(fmt.Sprintf("the neighbour's execd refused a command without its token (%d), and no execd token is readable in this box", status), e)
	}
	e.set("own_token_found_in", where)
	rstatus, rtext, err := osbCommandWithToken(ctx, url, string(body), token)
	if err != nil {
		e.setErr("retry_", err)
		return inconclusive("the neighbour's execd did not answer the retry with this box's token", e)
	}
	e.setInt("retry_status", rstatus)
	if rstatus == http.StatusOK && strings.Contains(rtext, `"text":"`+p.Token+`"`) {
		return escaped("the neighbour sandbox's execd accepts the execd token readable in this box ("+where+"): one token opens every sandbox", e)
	}
	return blocked(fmt.Sprintf("the neighbour's execd refused a command without a token (%d) and with this box's own token (%d): its token is its own", status, rstatus), e)
}

// osbExecdBase is the URL an execd endpoint names, in either form the
// platform gives: bare IPv4:PORT (upstream's host network mode) or
// IPv4:PORT/proxy/PORT through execd's own proxy (its bridge mode, server
// networking.py 269). Only an IP literal is sent to: the probe reaches the
// address the harness gave, no name.
func osbExecdBase(addr string) (string, error) {
	hostPort, path, _ := strings.Cut(addr, "/")
	ap, err := netip.ParseAddrPort(hostPort)
	if err != nil || !ap.Addr().Is4() {
		return "", fmt.Errorf("%q is not IPv4:PORT[/proxy/PORT]", addr)
	}
	if path != "" {
		port, ok := strings.CutPrefix(path, "proxy/")
		if n, err := strconv.Atoi(port); !ok || err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", fmt.Errorf("%q: the path is not /proxy/PORT", addr)
		}
	}
	if path == "" {
		return "http://" + ap.String(), nil
	}
	return "http://" + ap.String() + "/" + path, nil
}

// osbUnreachable reports a connection that never reached a listener: a
// timeout, an unreachable network or host, a reset by a filter.
func osbUnreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// osbCommandWithToken sends one execd command with X-EXECD-ACCESS-TOKEN and
// returns its status and (bounded) answer.
func osbCommandWithToken(ctx context.Context, url, body, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, osbTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-EXECD-ACCESS-TOKEN", token)
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, osbMaxBody))
	return resp.StatusCode, string(b), nil
}
