package impl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// The broker token probes test the token the platform's broker minted for
// the task (probes.Params.BrokerTaskToken, BrokerGrant): how long it lives,
// what it opens beyond its grant, and (with the host's replay after the
// sandbox is gone) whether it dies with the task. They speak the reference
// broker's protocol (canary.BrokerObjectsPath, BrokerIntrospectPath).
func init() {
	register(map[string]Func{
		"secrets.broker-token-lifetime":   brokerTokenLifetime,
		"secrets.broker-token-scope":      brokerTokenScope,
		"secrets.broker-token-replay":     brokerTokenReplay,
		"secrets.broker-token-revocation": brokerTokenRevocation,
	})
}

const (
	brokerObjectsPath    = "/v1/objects/"
	brokerIntrospectPath = "/v1/token/introspect"
	brokerObjectReply    = "SANDCHECK-BROKER object"
	// brokerSlack absorbs the clock's second granularity and the time
	// between the mint and the probe's look.
	brokerSlack = 2 * time.Second
	// maxBrokerToken bounds the token a probe accepts.
	maxBrokerToken = 2048
)

// brokerName is the shape of a tenant or resource name in a grant.
var brokerName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// brokerTask is a task's token and grant, checked.
type brokerTask struct {
	token string
	g     probes.BrokerGrant
}

// taskToken reads and checks the task's token and grant from the params.
func taskToken(p probes.Params, e ev) (brokerTask, string) {
	g := p.BrokerGrant
	switch {
	case g == nil || p.BrokerTaskToken == "":
		return brokerTask{}, "the harness handed the task no broker token"
	case len(p.BrokerTaskToken) > maxBrokerToken || headerSafe(p.BrokerTaskToken) != p.BrokerTaskToken:
		return brokerTask{}, "the task's broker token is not a header-safe value"
	}
	for _, n := range []string{g.Tenant, g.Resource, g.OtherResource, g.OtherTenant} {
		if !brokerName.MatchString(n) {
			return brokerTask{}, fmt.Sprintf("the grant names %q, not a harness-made name", n)
		}
	}
	if g.Operation != "read" && g.Operation != "write" {
		return brokerTask{}, fmt.Sprintf("the grant's operation %q is not read or write", g.Operation)
	}
	s := sha256.Sum256([]byte(p.BrokerTaskToken))
	e.set("token_sha256", hex.EncodeToString(s[:]))
	e.set("grant", g.Operation+" "+g.Tenant+"/"+g.Resource)
	return brokerTask{p.BrokerTaskToken, *g}, ""
}

// tokenClaims are the claims the lifetime probe reads, from the token
// itself (JWT-shaped) or the broker's introspection.
type tokenClaims struct {
	Active *bool  `json:"active"`
	Exp    *int64 `json:"exp"`
	Iat    *int64 `json:"iat"`
}

// jwtClaims decodes the payload of a JWT-shaped token; ok is false for an
// opaque token. The signature is not the probe's to check: the broker
// checks it on every use.
func jwtClaims(tok string) (tokenClaims, bool, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return tokenClaims{}, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return tokenClaims{}, true, fmt.Errorf("decoding the token's payload: %w", err)
	}
	var c tokenClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return tokenClaims{}, true, fmt.Errorf("parsing the token's claims: %w", err)
	}
	return c, true, nil
}

// brokerTokenLifetime checks that the task's token expires no later than
// the task's budget: from its exp claim when it is JWT-shaped, else from
// the broker's introspection. A token without an expiry, or living past
// the budget, is escaped.
func brokerTokenLifetime(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	t, why := taskToken(p, e)
	if why != "" {
		return inconclusive(why, e)
	}
	budget := time.Duration(t.g.BudgetSeconds) * time.Second
	e.setInt("budget_s", t.g.BudgetSeconds)
	c, isJWT, err := jwtClaims(t.token)
	switch {
	case err != nil:
		e.setErr("", err)
		return inconclusive("the token looks like a JWT but its claims do not parse", e)
	case isJWT:
		e.set("source", "jwt")
	default:
		e.set("source", "introspection")
		if p.BrokerAddr == "" {
			return inconclusive("the token is opaque and the harness named no broker to introspect it at", e)
		}
		status, body, _, err := brokerRequest(ctx, p, "secrets.broker-token-lifetime", http.MethodPost, brokerIntrospectPath,
			"token="+url.QueryEscape(t.token), "application/x-www-form-urlencoded", "")
		if err != nil || status != http.StatusOK {
			if err != nil {
				e.setErr("", err)
			}
			e.setInt("status", status)
			return inconclusive("the token is opaque and the broker's introspection did not answer", e)
		}
		dec := json.NewDecoder(strings.NewReader(body))
		if err := dec.Decode(&c); err != nil || c.Active == nil {
			return inconclusive("the broker's introspection answered without an active field", e)
		}
		if !*c.Active {
			return inconclusive("the broker's introspection calls the task's token inactive while the task runs", e)
		}
	}
	if c.Exp == nil || *c.Exp == 0 {
		e.set("exp", "none")
		return escaped(fmt.Sprintf("the task's broker token never expires (the task's budget is %s)", budget), e)
	}
	left := time.Until(time.Unix(*c.Exp, 0)).Round(time.Second)
	e.setf("exp", "%d", *c.Exp)
	e.setf("expires_in_s", "%d", int64(left/time.Second))
	life := ""
	if c.Iat != nil {
		e.setf("lifetime_s", "%d", *c.Exp-*c.Iat)
		life = fmt.Sprintf(" (a lifetime of %s)", time.Duration(*c.Exp-*c.Iat)*time.Second)
	}
	if left > budget+brokerSlack {
		return escaped(fmt.Sprintf("the task's broker token expires in %s%s, beyond the task's budget of %s", left, life, budget), e)
	}
	return blocked(fmt.Sprintf("the task's broker token expires in %s, within the task's budget of %s", left, budget), e)
}

// brokerTokenScope uses the task's token for its own grant and then for a
// neighbour resource, a write where a read was granted, and another
// tenant's object: any of those served is escaped; all refused, with the
// grant itself served, is blocked.
func brokerTokenScope(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	t, why := taskToken(p, e)
	if why != "" {
		return inconclusive(why, e)
	}
	if p.BrokerAddr == "" {
		return noAddress("tool broker", e)
	}
	const id = "secrets.broker-token-scope"
	if r, ok := ownGrant(ctx, p, id, t, "own_status", "the token did not open its own grant, so its refusals say nothing of its scope", e); !ok {
		return r
	}
	tries := []struct{ name, op, tenant, resource string }{
		{"neighbour resource", "read", t.g.Tenant, t.g.OtherResource},
		{"other tenant", "read", t.g.OtherTenant, t.g.Resource},
	}
	if t.g.Operation == "read" {
		tries = append(tries, struct{ name, op, tenant, resource string }{"write where read was granted", "write", t.g.Tenant, t.g.Resource})
	}
	var served, refused []string
	for _, tr := range tries {
		status, err := brokerObject(ctx, p, id, t, tr.op, tr.tenant, tr.resource)
		if err != nil {
			e.setErr(strings.ReplaceAll(tr.name, " ", "_")+"_", err)
			return inconclusive("the tool broker stopped answering during the scope checks", e)
		}
		what := fmt.Sprintf("%s (%s %s/%s): %d", tr.name, tr.op, tr.tenant, tr.resource, status)
		switch status {
		case http.StatusOK:
			served = append(served, what)
		case http.StatusUnauthorized, http.StatusForbidden:
			refused = append(refused, what)
		default:
			e.set("unexpected", what)
			return inconclusive("the tool broker answered a scope check with neither success nor refusal", e)
		}
	}
	e.setList("served", served)
	e.setList("refused", refused)
	if len(served) > 0 {
		return escaped("the task's token opened more than its grant: "+strings.Join(served, "; "), e)
	}
	return blocked("the task's token opened its own grant and was refused for a neighbour resource, another tenant and any other operation", e)
}

// brokerTokenReplay uses the task's token once on its own grant, so the
// broker has seen it from the box; whether it outlives the sandbox is the
// host's to tell: once the sandbox is gone the harness replays it
// (broker:replay). The probe reports blocked, as the teardown family does
// for what it left behind, and the policy holds that "blocked" to the
// broker refusing the replay; an accepted replay makes it escaped.
func brokerTokenReplay(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	t, why := taskToken(p, e)
	if why != "" {
		return inconclusive(why, e)
	}
	if p.BrokerAddr == "" {
		e.set("used", "false")
		return blocked("the box cannot reach the broker to use its token; the host's replay after teardown decides", e)
	}
	status, err := brokerObject(ctx, p, "secrets.broker-token-replay", t, t.g.Operation, t.g.Tenant, t.g.Resource)
	if err != nil {
		e.setErr("", err)
	}
	e.setInt("status", status)
	return blocked("the box used its token during the run and keeps nothing else; the host's replay after teardown decides", e)
}

// revocationPoll is how often the revocation probe uses its token while
// it waits for the harness's revocation to take effect.
const revocationPoll = 250 * time.Millisecond

// brokerTokenRevocation uses the task's token until the broker refuses
// it: the harness revokes the token once the broker has served it, so a
// refusal within the revocation bound (plus the poll's slack) is blocked
// and a token still served after it is escaped. The host's record of the
// revocation and of every later use settles the delay (broker:revocation).
func brokerTokenRevocation(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	t, why := taskToken(p, e)
	if why != "" {
		return inconclusive(why, e)
	}
	if p.BrokerAddr == "" {
		return noAddress("tool broker", e)
	}
	bound := time.Duration(t.g.RevocationBoundMillis) * time.Millisecond
	if bound <= 0 || bound > time.Minute {
		return inconclusive("the harness named no revocation bound", e)
	}
	e.setf("bound_ms", "%d", bound.Milliseconds())
	const id = "secrets.broker-token-revocation"
	if r, ok := ownGrant(ctx, p, id, t, "first_status", "the token did not open its own grant before any revocation", e); !ok {
		return r
	}
	start := time.Now()
	// The harness revokes after the broker served the first use; the loop
	// waits for that, the bound and the poll's slack, and no longer.
	deadline := start.Add(bound + 2*time.Second + revocationPoll)
	uses := 1
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return inconclusive("the probe's time ran out while waiting for the revocation", e)
		case <-time.After(revocationPoll):
		}
		status, err := brokerObject(ctx, p, id, t, t.g.Operation, t.g.Tenant, t.g.Resource)
		uses++
		if err != nil {
			e.setErr("", err)
			return inconclusive("the tool broker stopped answering while the probe waited for the revocation", e)
		}
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			e.setInt("uses", uses)
			e.setf("refused_after_ms", "%d", time.Since(start).Milliseconds())
			return blocked(fmt.Sprintf("the broker refused the task's token %s after its first use (revocation bound %s)", time.Since(start).Round(10*time.Millisecond), bound), e)
		}
	}
	e.setInt("uses", uses)
	return escaped(fmt.Sprintf("the broker still served the task's token %s after its first use, past the revocation bound of %s", time.Since(start).Round(10*time.Millisecond), bound), e)
}

// ownGrant uses the task's token on its own grant, the first call of the
// scope and revocation probes: ok is true when the broker served it.
// Otherwise r is the probe's result: no connection is blocked (the box
// cannot reach the broker at all), a connection without an answer is
// inconclusive, and another status is inconclusive with why, the status
// kept under key.
func ownGrant(ctx context.Context, p probes.Params, probe string, t brokerTask, key, why string, e ev) (r probes.Result, ok bool) {
	status, err := brokerObject(ctx, p, probe, t, t.g.Operation, t.g.Tenant, t.g.Resource)
	switch {
	case err != nil && status == -1:
		e.setErr("", err)
		return blocked("no connection to the tool broker could be made", e), false
	case err != nil:
		e.setErr("", err)
		return inconclusive("a connection to the tool broker opened, but no answer came", e), false
	case status != http.StatusOK:
		e.setInt(key, status)
		return inconclusive(why, e), false
	}
	return probes.Result{}, true
}

// brokerObject calls the broker's object of tenant/resource for the
// operation with the task's token and returns the status (-1 when no
// connection opened, 0 when one opened but no answer came).
func brokerObject(ctx context.Context, p probes.Params, probe string, t brokerTask, op, tenant, resource string) (int, error) {
	method := map[string]string{"read": http.MethodGet, "write": http.MethodPut}[op]
	body := ""
	if method == http.MethodPut {
		body = `{"status":"sandcheck-probe"}`
	}
	status, reply, connected, err := brokerRequest(ctx, p, probe, method, brokerObjectsPath+tenant+"/"+resource, body, "application/json", t.token)
	if err != nil {
		if !connected {
			return -1, err
		}
		return 0, err
	}
	if status == http.StatusOK && !strings.HasPrefix(reply, brokerObjectReply) {
		return status, fmt.Errorf("something answered at the broker's address, but not as the broker: %q", clip(reply, 64))
	}
	return status, nil
}

// brokerRequest sends one request to the broker's address, with the
// probe's attribution and the bearer token when given, and returns the
// status, the start of the answer and whether a connection opened.
func brokerRequest(ctx context.Context, p probes.Params, probe, method, path, body, ctype, bearer string) (int, string, bool, error) {
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
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(clip(body, brokerMaxBody)))
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.BrokerAddr+path, rd)
	if err != nil {
		return 0, "", false, err
	}
	tok := headerSafe(p.Token)
	req.Header.Set("User-Agent", "sandcheck-probe/"+tok+"/"+probe)
	req.Header.Set("X-Sandcheck-Token", tok+"/"+probe)
	if body != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+headerSafe(bearer))
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", connected, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, brokerMaxBody))
	return resp.StatusCode, string(b), true, nil
}
