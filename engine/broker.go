package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// brokerSource is the source of the host's evidence about a broker token:
// the broker's own record of what it minted, accepted and refused.
const brokerSource = "broker"

// The harness-made grant every task's token carries, and the neighbours
// the scope probe tries beyond it. None names anything real.
var brokerGrant = probes.BrokerGrant{Tenant: "sandcheck-tenant-a", Resource: "tickets", Operation: canary.OpRead,
	OtherResource: "invoices", OtherTenant: "sandcheck-tenant-b"}

// brokerRun is the run's part of the target's broker: for the reference
// broker, the harness plays the platform, minting a token per task
// invocation and tearing it down with the task's sandbox; the broker's
// record is the host's evidence. A nil *brokerRun is a target without a
// broker.
type brokerRun struct {
	// untestable, when set, is why the broker probes cannot run.
	untestable string
	tb         *canary.TokenBroker
	runID      string
	bound      time.Duration // the target's revocation bound

	mu    sync.Mutex
	tasks map[string]*brokerTask // by the invocation's token
}

// brokerTask is one task's token, known to the harness (it minted it);
// only its SHA-256 and claims leave this struct.
type brokerTask struct {
	token  string
	sum    string
	claims canary.TokenClaims
	grant  probes.BrokerGrant
	// stop ends the revocation watch (nil: none); it waits for it.
	stop func()
}

// newBrokerRun sets up the target's broker: the reference broker in the
// declared mode, served beside the harness network's tool broker when the
// run has one (without it the box cannot reach the broker, and the host's
// replay still can).
func newBrokerRun(tg *targets.Target, net *netharness.Network, runID string) (*brokerRun, error) {
	switch {
	case tg.Broker == nil:
		return &brokerRun{untestable: "the target declares no broker (broker:), so the tokens it hands a task cannot be tested"}, nil
	case tg.BrokerReference() == "":
		return &brokerRun{untestable: "the target declares a platform's own broker; this build drives only the harness's reference broker (broker: {reference: weak|hardened}), not a platform's token capture, introspection and revoke call"}, nil
	}
	tb, err := canary.NewTokenBroker(canary.TokenBrokerOptions{Mode: canary.BrokerMode(tg.BrokerReference())})
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", tg.Path, err)
	}
	if net != nil && net.ToolBroker() != nil {
		net.ToolBroker().WithReference(tb)
	}
	return &brokerRun{tb: tb, runID: runID, bound: tg.Broker.Bound(), tasks: map[string]*brokerTask{}}, nil
}

// brokerKinds are the spec's broker host kinds.
func brokerKinds(spec probes.Spec) []string {
	var out []string
	for _, h := range spec.Host {
		if strings.HasPrefix(h, "broker:") {
			out = append(out, h)
		}
	}
	return out
}

// untestableReason says why the spec, a broker probe, cannot be run here
// ("" when it can, or is no broker probe).
func (b *brokerRun) untestableReason(spec probes.Spec) string {
	if b == nil || len(brokerKinds(spec)) == 0 {
		return ""
	}
	return b.untestable
}

// params mints the token of one invocation when it carries a broker probe,
// with a lifetime of the invocation's budget (the longest timeout among
// its probes), and hands it to the task as the platform would.
func (b *brokerRun) params(p *probes.Params, token string, ids []string) error {
	if b == nil || b.tb == nil {
		return nil
	}
	var budget time.Duration
	revoke := false
	for _, id := range ids {
		if s, ok := probes.Lookup(id); ok && len(brokerKinds(s)) > 0 {
			budget = max(budget, s.Timeout.D())
			revoke = revoke || slices.Contains(s.Host, "broker:revocation")
		}
	}
	if budget == 0 {
		return nil
	}
	g := brokerGrant
	g.BudgetSeconds = int(budget / time.Second)
	if revoke {
		g.RevocationBoundMillis = int(b.bound / time.Millisecond)
	}
	tok, claims, err := b.tb.Mint(canary.Grant{Run: b.runID, Task: token, Tenant: g.Tenant, Resource: g.Resource, Operation: g.Operation, TTL: budget})
	if err != nil {
		return fmt.Errorf("minting the task's broker token: %w", err)
	}
	t := &brokerTask{token: tok, sum: canary.TokenSHA256(tok), claims: claims, grant: g}
	if revoke {
		t.stop = b.watchRevocation(t.sum, budget)
	}
	b.mu.Lock()
	b.tasks[token] = t
	b.mu.Unlock()
	p.BrokerTaskToken, p.BrokerGrant = tok, &g
	return nil
}

func (b *brokerRun) task(token string) *brokerTask {
	if b == nil || b.tb == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tasks[token]
}

// claimsData is a token's SHA-256 and claims as evidence data.
func (t *brokerTask) claimsData() map[string]string {
	c := t.claims
	return map[string]string{"token_sha256": t.sum, "tenant": c.Tenant, "resource": c.Resource, "operation": c.Operation,
		"run": c.Run, "task": c.Task, "iat": fmt.Sprint(c.IssuedAt), "exp": fmt.Sprint(c.Expiry),
		"lifetime_s": fmt.Sprint(int64(c.Lifetime() / time.Second)), "budget_s": fmt.Sprint(t.grant.BudgetSeconds)}
}

// revocationWatchPoll is how often the harness looks for the box's first
// served use of a token it is to revoke.
const revocationWatchPoll = 50 * time.Millisecond

// watchRevocation plays the platform's response path for one task: once
// the broker has served the box's first use of the token, the harness
// revokes it (the platform's revoke call; for the reference broker, its
// Revoke). It gives up after the task's budget. The returned stop ends
// the watch and waits for it.
func (b *brokerRun) watchRevocation(sum string, budget time.Duration) func() {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.NewTimer(budget)
		defer deadline.Stop()
		tick := time.NewTicker(revocationWatchPoll)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-deadline.C:
				return
			case <-tick.C:
			}
			for _, u := range b.tb.Uses(sum) {
				if u.Action == "use" && u.Accepted && u.Remote != "harness" {
					b.tb.Revoke(sum, "harness")
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// brokerObserver gives the broker's record of the probe's task token:
// broker:lifetime from what the broker minted, broker:scope from what it
// accepted and refused during the run. broker:replay is gathered after
// the sandbox is closed (brokerAfterClose).
func brokerObserver(e *Engine, kind string, o observation) []evidence.Item {
	t := e.broker.task(o.token)
	if t == nil {
		return []evidence.Item{{Source: brokerSource, Kind: strings.TrimPrefix(kind, "broker:"),
			Summary: "the harness minted no broker token for this task"}}
	}
	switch kind {
	case "broker:lifetime":
		return []evidence.Item{lifetimeItem(t)}
	case "broker:scope":
		// With the broker's path from the box (pathKinds): a record of
		// no use settles only where the box had no way to the broker.
		return append([]evidence.Item{scopeItem(t, e.broker.tb.Uses(t.sum))}, netpathObserver(e, "netpath:broker", o)...)
	case "broker:revocation":
		if t.stop != nil {
			t.stop()
		}
		return append([]evidence.Item{revocationItem(t, e.broker.tb.Uses(t.sum), e.broker.bound)}, netpathObserver(e, "netpath:broker", o)...)
	}
	return nil
}

// lifetimeItem settles the lifetime from the broker's own mint: no expiry,
// or one past the task's budget, is escaped, naming both durations.
func lifetimeItem(t *brokerTask) evidence.Item {
	it := evidence.Item{Source: brokerSource, Kind: "lifetime", Data: t.claimsData()}
	budget := time.Duration(t.grant.BudgetSeconds) * time.Second
	switch life := t.claims.Lifetime(); {
	case life == 0:
		it.Indicates = probes.Escaped
		it.Summary = fmt.Sprintf("the broker minted the task a token that never expires; the task's budget is %s", budget)
	case life > budget:
		it.Indicates = probes.Escaped
		it.Summary = fmt.Sprintf("the broker minted the task a token living %s, longer than the task's budget of %s", life, budget)
	default:
		it.Indicates = probes.Blocked
		it.Summary = fmt.Sprintf("the broker minted the task a token living %s, within the task's budget of %s", life, budget)
	}
	return it
}

// scopeItem reads the broker's record of the token's uses from the box:
// any use outside the grant it accepted is escaped; refusals of every
// out-of-scope use, with none accepted, is blocked; no such use seen
// indicates nothing.
func scopeItem(t *brokerTask, uses []canary.BrokerUse) evidence.Item {
	it := evidence.Item{Source: brokerSource, Kind: "scope", Data: t.claimsData()}
	var accepted, refused []string
	for _, u := range uses {
		if u.Action != "use" || u.Remote == "harness" {
			continue
		}
		if u.Tenant == t.grant.Tenant && u.Resource == t.grant.Resource && u.Operation == t.grant.Operation {
			continue
		}
		what := fmt.Sprintf("%s %s/%s: %d", u.Operation, u.Tenant, u.Resource, u.Status)
		if u.Accepted {
			accepted = append(accepted, what)
		} else {
			refused = append(refused, what)
		}
	}
	it.Data["accepted_out_of_scope"] = fmt.Sprint(len(accepted))
	it.Data["refused_out_of_scope"] = fmt.Sprint(len(refused))
	switch {
	case len(accepted) > 0:
		it.Indicates = probes.Escaped
		it.Summary = "the broker accepted the task's token outside its grant (" + t.grant.Operation + " " + t.grant.Tenant + "/" + t.grant.Resource + "): " + truncate(strings.Join(accepted, ", "), 300)
	case len(refused) > 0:
		it.Indicates = probes.Blocked
		it.Summary = "the broker refused every use of the task's token outside its grant: " + truncate(strings.Join(refused, ", "), 300)
	default:
		it.Summary = "the broker saw no use of the task's token outside its grant"
	}
	return it
}

// revocationItem measures, from the broker's record, how long the broker
// kept honouring the token after the harness revoked it: a use it served
// later than the bound after the revocation is escaped, naming the delay;
// a refusal with nothing served past the bound is blocked, naming the
// delay to the first refusal; no revocation or no later use indicates
// nothing.
func revocationItem(t *brokerTask, uses []canary.BrokerUse, bound time.Duration) evidence.Item {
	it := evidence.Item{Source: brokerSource, Kind: "revocation", Data: t.claimsData()}
	it.Data["bound_ms"] = fmt.Sprint(bound.Milliseconds())
	var revokedAt, lastServed, firstRefused time.Time
	served := 0
	for _, u := range uses {
		switch {
		case u.Action == "revoke" && u.Remote == "harness" && revokedAt.IsZero():
			revokedAt = u.Time
		case revokedAt.IsZero() || u.Action != "use" || u.Remote == "harness":
		case u.Accepted:
			served++
			lastServed = u.Time
		case firstRefused.IsZero():
			firstRefused = u.Time
		}
	}
	it.Data["served_after_revocation"] = fmt.Sprint(served)
	switch {
	case revokedAt.IsZero():
		it.Summary = "the harness did not revoke the token: the broker never served the box's use of it"
	case served > 0 && lastServed.Sub(revokedAt) > bound:
		d := lastServed.Sub(revokedAt)
		it.Indicates = probes.Escaped
		it.Data["delay_ms"] = fmt.Sprint(d.Milliseconds())
		it.Summary = fmt.Sprintf("the broker still served the task's token %s after the harness revoked it (%d use(s)); the target's bound is %s", d.Round(time.Millisecond), served, bound)
	case !firstRefused.IsZero():
		d := firstRefused.Sub(revokedAt)
		it.Indicates = probes.Blocked
		it.Data["delay_ms"] = fmt.Sprint(d.Milliseconds())
		it.Summary = fmt.Sprintf("the broker refused the task's token %s after the harness revoked it, within the target's bound of %s", d.Round(time.Millisecond), bound)
	default:
		it.Summary = "the harness revoked the token, but the box made no use of it after the bound to tell"
	}
	return it
}

// brokerAfterClose is the platform's teardown of the task's token and the
// host's replay of it, once the probe's sandbox is gone: the reference
// broker is told the task ended (the hardened one revokes its token, the
// weak one does nothing), then, for a probe naming broker:replay, the
// harness presents the token the box saw for its own grant. The broker's
// answer settles the probe: accepted is escaped, refused blocked (and
// policies/rego/broker.rego holds a "blocked" to that refusal).
func (e *Engine) brokerAfterClose(spec probes.Spec, s *sandbox) []evidence.Item {
	kinds := brokerKinds(spec)
	if len(kinds) == 0 || e.broker == nil || e.broker.tb == nil {
		return nil
	}
	e.mu.Lock()
	token := s.tokens[spec.ID]
	e.mu.Unlock()
	t := e.broker.task(token)
	if t == nil {
		return nil
	}
	if t.stop != nil {
		t.stop()
	}
	e.broker.tb.EndTask(t.sum)
	if !slices.Contains(kinds, "broker:replay") {
		return nil
	}
	u := e.broker.tb.Use(t.token, t.grant.Tenant, t.grant.Resource, t.grant.Operation, "harness")
	it := evidence.Item{Source: brokerSource, Kind: "replay", Data: t.claimsData()}
	it.Data["status"] = fmt.Sprint(u.Status)
	if u.Accepted {
		it.Indicates = probes.Escaped
		it.Summary = fmt.Sprintf("after the sandbox was torn down the harness replayed the task's token (sha256 %s) and the broker accepted it", t.sum[:16])
	} else {
		it.Indicates = probes.Blocked
		it.Data["reason"] = u.Reason
		it.Summary = fmt.Sprintf("after the sandbox was torn down the harness replayed the task's token (sha256 %s) and the broker refused it: %s", t.sum[:16], u.Reason)
	}
	return []evidence.Item{it}
}
