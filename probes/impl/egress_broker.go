package impl

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// Broker protocol (canary.BrokerPath, canary.BrokerReply).
const (
	brokerPath  = "/v1/query"
	brokerReply = "SANDCHECK-BROKER ok"
)

func init() {
	register(map[string]Func{
		"egress.tool-broker":     toolBroker,
		"egress.broker-no-token": brokerNoToken,
	})
}

// toolBroker calls the tool broker with the task's broker token, as a
// brokered task does its work. It is the workload of a brokered-data-task
// profile (expected "escaped" there: the broker served it) and egress for
// every profile without a broker.
func toolBroker(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.BrokerAddr == "" {
		return noAddress("tool broker", e)
	}
	return brokerCall(ctx, p, e, "egress.tool-broker", p.BrokerToken,
		"the tool broker served a request made with the task's token",
		"the tool broker refused the task's token")
}

// brokerNoToken calls the tool broker without any token. The broker (the
// egress policy's own enforcement point) must refuse it; one that serves it
// lets any code that reaches it act with the platform's authority.
func brokerNoToken(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.BrokerAddr == "" {
		return noAddress("tool broker", e)
	}
	return brokerCall(ctx, p, e, "egress.broker-no-token", "",
		"the tool broker served a request that carried no token",
		"the tool broker refused a request without its token")
}

// brokerCall GETs the broker's query path, with the bearer token when
// given, and decides on the answer.
func brokerCall(ctx context.Context, p probes.Params, e ev, probe, token, served, refused string) probes.Result {
	e.set("server", p.BrokerAddr)
	e.set("with_token", map[bool]string{true: "true", false: "false"}[token != ""])
	ctx, cancel := context.WithTimeout(ctx, egressTimeout)
	defer cancel()
	d := net.Dialer{Timeout: egressTimeout}
	connected := false
	cl := &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := d.DialContext(ctx, "tcp4", p.BrokerAddr)
				connected = connected || err == nil
				return c, err
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       egressTimeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.BrokerAddr+brokerPath, nil)
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not build the broker request", e)
	}
	tok := headerSafe(p.Token)
	req.Header.Set("User-Agent", "sandcheck-probe/"+tok+"/"+probe)
	req.Header.Set("X-Sandcheck-Token", tok+"/"+probe)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+headerSafe(token))
	}
	resp, err := cl.Do(req)
	if err != nil {
		e.setErr("", err)
		if connected {
			return inconclusive("a connection to the tool broker opened, but no answer came", e)
		}
		return blocked("no connection to the tool broker could be made", e)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	e.setInt("status", resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), brokerReply):
		return escaped(served, e)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return blocked(refused, e)
	}
	return inconclusive("something answered at the tool broker's address, but not as the harness's broker", e)
}
