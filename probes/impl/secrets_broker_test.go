package impl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
)

// brokerParams serves a reference broker of the mode on the loopback and
// mints the task's token for the probe's parameters.
func brokerParams(t *testing.T, mode canary.BrokerMode, ttl time.Duration) (probes.Params, *canary.TokenBroker) {
	t.Helper()
	ctx := context.Background()
	tb, err := canary.NewTokenBroker(canary.TokenBrokerOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := canary.Serve(ctx, "127.0.0.1:0", canary.NewBroker(nil, "scbstatic", false).WithReference(tb), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(ctx) })
	g := probes.BrokerGrant{Tenant: "tenant-a", Resource: "tickets", Operation: "read", OtherResource: "invoices", OtherTenant: "tenant-b", BudgetSeconds: 15}
	tok, _, err := tb.Mint(canary.Grant{Run: "r", Task: "t", Tenant: g.Tenant, Resource: g.Resource, Operation: g.Operation, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return probes.Params{Token: "sctest", BrokerAddr: srv.Addr().String(), BrokerTaskToken: tok, BrokerGrant: &g}, tb
}

// TestBrokerTokenProbesControls: against the weak reference broker the
// lifetime and scope probes escape (a static key that never expires and
// opens anything); against the hardened one they are blocked; a hardened
// token minted for longer than the budget fails the lifetime probe naming
// both durations.
func TestBrokerTokenProbesControls(t *testing.T) {
	ctx := context.Background()
	weak, _ := brokerParams(t, canary.BrokerWeak, 15*time.Second)
	hard, tb := brokerParams(t, canary.BrokerHardened, 15*time.Second)
	long, _ := brokerParams(t, canary.BrokerHardened, 24*time.Hour)
	for _, tc := range []struct {
		name string
		f    Func
		p    probes.Params
		want probes.Outcome
		in   string
	}{
		{"lifetime weak", brokerTokenLifetime, weak, probes.Escaped, "never expires"},
		{"lifetime hardened", brokerTokenLifetime, hard, probes.Blocked, "within the task's budget of 15s"},
		{"lifetime too long", brokerTokenLifetime, long, probes.Escaped, "(a lifetime of 24h0m0s), beyond the task's budget of 15s"},
		{"scope weak", brokerTokenScope, weak, probes.Escaped, "neighbour resource"},
		{"scope hardened", brokerTokenScope, hard, probes.Blocked, "refused"},
		{"replay hardened", brokerTokenReplay, hard, probes.Blocked, "host's replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.f(ctx, tc.p)
			if r.Outcome != tc.want || !strings.Contains(r.Detail, tc.in) {
				t.Errorf("%s: %q, want %s containing %q (%v)", tc.name, r.Outcome, tc.want, tc.in, r.Evidence)
			}
			for k, v := range r.Evidence {
				if strings.Contains(v, tc.p.BrokerTaskToken) {
					t.Errorf("evidence %s holds the token", k)
				}
			}
		})
	}
	// The weak key was introspected, not parsed.
	if r := brokerTokenLifetime(ctx, weak); r.Evidence["source"] != "introspection" {
		t.Errorf("weak lifetime source %v", r.Evidence)
	}
	// Every refused scope check is in the hardened broker's record.
	refused := 0
	for _, u := range tb.Uses(canary.TokenSHA256(hard.BrokerTaskToken)) {
		if u.Action == "use" && !u.Accepted {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("the broker recorded %d refusals, want 3", refused)
	}
	// Malformed parameters settle nothing.
	bad := hard
	g := *hard.BrokerGrant
	g.Tenant = "../etc"
	bad.BrokerGrant = &g
	if r := brokerTokenScope(ctx, bad); r.Outcome != probes.Inconclusive {
		t.Errorf("a bad grant: %s", r.Outcome)
	}
	if r := brokerTokenLifetime(ctx, probes.Params{}); r.Outcome != probes.Inconclusive {
		t.Errorf("no token: %s", r.Outcome)
	}
}

// TestBrokerTokenRevocationProbe: with the harness revoking after the
// first served use (played here), the probe is blocked against the
// hardened broker and escaped against the weak one, which ignores the
// revocation past the bound.
func TestBrokerTokenRevocationProbe(t *testing.T) {
	for mode, want := range map[canary.BrokerMode]probes.Outcome{canary.BrokerWeak: probes.Escaped, canary.BrokerHardened: probes.Blocked} {
		t.Run(string(mode), func(t *testing.T) {
			p, tb := brokerParams(t, mode, 15*time.Second)
			p.BrokerGrant.RevocationBoundMillis = 300
			sum := canary.TokenSHA256(p.BrokerTaskToken)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; i < 200; i++ {
					for _, u := range tb.Uses(sum) {
						if u.Action == "use" && u.Accepted {
							tb.Revoke(sum, "harness")
							return
						}
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			r := brokerTokenRevocation(context.Background(), p)
			<-done
			if r.Outcome != want {
				t.Errorf("%s: %s (%s)", mode, r.Outcome, r.Detail)
			}
		})
	}
}
