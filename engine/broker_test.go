package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

func brokerTarget(t *testing.T, broker string) *targets.Target {
	t.Helper()
	src := "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: brokered-data-task\ndocker:\n  runtime: runc\n  network: none\n" + broker
	tg, err := targets.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestBrokerRunControls plays the platform for one broker probe's task on
// each reference broker: the token minted into the params, the host's
// lifetime fact from the mint, and the replay after teardown, accepted by
// the weak broker (escaped) and refused by the hardened one (blocked). The
// evidence names the token by its SHA-256 only.
func TestBrokerRunControls(t *testing.T) {
	spec, ok := probes.Lookup("secrets.broker-token-replay")
	if !ok {
		t.Fatal("no replay probe in the catalog")
	}
	life, _ := probes.Lookup("secrets.broker-token-lifetime")
	for mode, want := range map[string]probes.Outcome{"weak": probes.Escaped, "hardened": probes.Blocked} {
		t.Run(mode, func(t *testing.T) {
			b, err := newBrokerRun(brokerTarget(t, "broker: {reference: "+mode+"}\n"), nil, "run1")
			if err != nil {
				t.Fatal(err)
			}
			if b.untestableReason(spec) != "" {
				t.Fatalf("untestable: %s", b.untestableReason(spec))
			}
			e := &Engine{broker: b}
			var p probes.Params
			if err := b.params(&p, "sctok1", []string{spec.ID}); err != nil {
				t.Fatal(err)
			}
			if p.BrokerTaskToken == "" || p.BrokerGrant == nil || p.BrokerGrant.BudgetSeconds != int(spec.Timeout.D().Seconds()) {
				t.Fatalf("params %+v", p.BrokerGrant)
			}
			lt := brokerObserver(e, "broker:lifetime", observation{spec: life, token: "sctok1"})
			if len(lt) != 1 || lt[0].Indicates != want {
				t.Errorf("lifetime %+v, want %s", lt, want)
			}
			items := e.brokerAfterClose(spec, &sandbox{tokens: map[string]string{spec.ID: "sctok1"}})
			if len(items) != 1 || items[0].Indicates != want || items[0].Kind != "replay" {
				t.Fatalf("replay %+v, want %s", items, want)
			}
			for _, it := range append(items, lt...) {
				for k, v := range it.Data {
					if strings.Contains(v, p.BrokerTaskToken) {
						t.Errorf("%s holds the token", k)
					}
				}
				if strings.Contains(it.Summary, p.BrokerTaskToken) {
					t.Errorf("summary holds the token")
				}
			}
		})
	}
}

// TestBrokerRunUntestable: without a broker, or with a platform's own
// broker this build does not drive, the broker probes are not-tested with
// the reason, and other probes are untouched.
func TestBrokerRunUntestable(t *testing.T) {
	spec, _ := probes.Lookup("secrets.broker-token-scope")
	other, _ := probes.Lookup("egress.tool-broker")
	for name, decl := range map[string]string{"none": "", "platform": "broker: {token: {env: BROKER_TOKEN}}\n"} {
		b, err := newBrokerRun(brokerTarget(t, decl), nil, "run1")
		if err != nil {
			t.Fatal(err)
		}
		if why := b.untestableReason(spec); why == "" {
			t.Errorf("%s: the scope probe would run", name)
		}
		if why := b.untestableReason(other); why != "" {
			t.Errorf("%s: a probe without broker evidence is untestable: %s", name, why)
		}
		var p probes.Params
		if err := b.params(&p, "sctok", []string{spec.ID}); err != nil || p.BrokerTaskToken != "" {
			t.Errorf("%s: a token was minted without a reference broker", name)
		}
	}
}

// TestBrokerRevocationControls plays the box's side of the revocation
// probe against each reference broker: the harness revokes once the box's
// first use is served; the hardened broker refuses the next use (blocked,
// the delay measured), the weak one keeps serving it past the bound
// (escaped, naming the delay and the bound).
func TestBrokerRevocationControls(t *testing.T) {
	spec, ok := probes.Lookup("secrets.broker-token-revocation")
	if !ok {
		t.Fatal("no revocation probe in the catalog")
	}
	for mode, want := range map[string]probes.Outcome{"weak": probes.Escaped, "hardened": probes.Blocked} {
		t.Run(mode, func(t *testing.T) {
			b, err := newBrokerRun(brokerTarget(t, "broker: {reference: "+mode+", revocation_bound: 300ms}\n"), nil, "run1")
			if err != nil {
				t.Fatal(err)
			}
			e := &Engine{broker: b}
			var p probes.Params
			if err := b.params(&p, "sctok2", []string{spec.ID}); err != nil {
				t.Fatal(err)
			}
			if p.BrokerGrant.RevocationBoundMillis != 300 {
				t.Fatalf("bound %d", p.BrokerGrant.RevocationBoundMillis)
			}
			g := p.BrokerGrant
			use := func() bool {
				return b.tb.Use(p.BrokerTaskToken, g.Tenant, g.Resource, g.Operation, "10.0.0.2:1234").Accepted
			}
			if !use() {
				t.Fatal("the first use was refused")
			}
			deadline := time.Now().Add(5 * time.Second)
			for use() && time.Now().Before(deadline) && (mode == "hardened" || time.Now().Before(deadline.Add(-4*time.Second))) {
				time.Sleep(50 * time.Millisecond)
			}
			items := brokerObserver(e, "broker:revocation", observation{spec: spec, token: "sctok2"})
			if len(items) != 1 || items[0].Indicates != want || items[0].Data["delay_ms"] == "" {
				t.Fatalf("revocation %+v, want %s", items, want)
			}
			if want == probes.Escaped && !strings.Contains(items[0].Summary, "the target's bound is 300ms") {
				t.Errorf("summary %q", items[0].Summary)
			}
		})
	}
}

// TestBrokerScopeItem reads the broker's record of the box's uses: an
// out-of-scope use it accepted is escaped, refusals alone are blocked, the
// grant itself and the harness's own calls count for nothing.
func TestBrokerScopeItem(t *testing.T) {
	task := &brokerTask{sum: "ab", grant: brokerGrant}
	g := brokerGrant
	own := canary.BrokerUse{Action: "use", Tenant: g.Tenant, Resource: g.Resource, Operation: g.Operation, Accepted: true, Status: 200, Remote: "10.0.0.2:1"}
	other := canary.BrokerUse{Action: "use", Tenant: g.OtherTenant, Resource: g.Resource, Operation: g.Operation, Status: 403, Remote: "10.0.0.2:1"}
	harness := canary.BrokerUse{Action: "use", Tenant: g.Tenant, Resource: g.OtherResource, Operation: g.Operation, Accepted: true, Status: 200, Remote: "harness"}
	if it := scopeItem(task, []canary.BrokerUse{own, harness}); it.Indicates != "" {
		t.Errorf("own and harness uses: %+v", it)
	}
	if it := scopeItem(task, []canary.BrokerUse{own, other}); it.Indicates != probes.Blocked || it.Data["refused_out_of_scope"] != "1" {
		t.Errorf("a refusal: %+v", it)
	}
	served := other
	served.Accepted, served.Status = true, 200
	if it := scopeItem(task, []canary.BrokerUse{own, other, served}); it.Indicates != probes.Escaped || !strings.Contains(it.Summary, "sandcheck-tenant-b/tickets: 200") {
		t.Errorf("an accepted out-of-scope use: %+v", it)
	}
}
