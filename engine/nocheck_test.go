package engine

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// verifiedBox is a meteredBox whose teardown check runs and finds nothing.
type verifiedBox struct{ meteredBox }

func (*verifiedBox) VerifyTeardown(context.Context) ([]string, error) { return nil, nil }

// TestTeardownCheckedOnlyWhenAVerifierRan: the record said nothing of
// whether a teardown check ran (teardown_leftovers omitted alike for "no
// check" and "found nothing"), and verified-teardown passed on a runner
// with no verifier; now the sandbox records teardown_checked only where
// the check ran.
func TestTeardownCheckedOnlyWhenAVerifierRan(t *testing.T) {
	for name, c := range map[string]struct {
		s    *sandbox
		want bool
	}{
		"no verifier": {&sandbox{sb: &meteredBox{}}, false},
		"verifier":    {&sandbox{sb: &verifiedBox{}}, true},
	} {
		e := &Engine{log: slog.New(slog.DiscardHandler), rec: &evidence.Record{Sandboxes: []evidence.Sandbox{{ID: "box", Name: "shared"}}}}
		e.closeSandbox(c.s)
		if got := e.rec.Sandboxes[0].TeardownChecked; got != c.want || len(e.rec.Sandboxes[0].Teardown) != 0 {
			t.Errorf("%s: teardown_checked %t, leftovers %v; want %t and none", name, got, e.rec.Sandboxes[0].Teardown, c.want)
		}
	}
}

// TestNoPathFactIsSaid: a sandbox whose namespace the host cannot enter
// gave no item at all, and its probe's "blocked" stood on its word; now it
// gets runtime/netpath-none, which the policy holds unconfirmed.
func TestNoPathFactIsSaid(t *testing.T) {
	items := netpathObserver(&Engine{}, "netpath:outside", observation{s: &sandbox{sb: &meteredBox{}}})
	if len(items) != 1 || items[0].Source != evidence.SourceRuntime || items[0].Kind != "netpath-none" || items[0].Indicates != "" || items[0].Data["path"] != "outside" {
		t.Fatalf("items %+v, want one runtime/netpath-none indicating nothing", items)
	}
}

// TestBrokerProbesAreDialledAtTheBroker: a broker record showing no use at
// all settles a scope or revocation probe only where the box had no way to
// the broker, so those probes' sandboxes are dialled at it; others are not.
func TestBrokerProbesAreDialledAtTheBroker(t *testing.T) {
	for _, id := range []string{"secrets.broker-token-scope", "secrets.broker-token-revocation"} {
		spec, ok := probes.Lookup(id)
		if !ok {
			t.Fatalf("no %s in the catalog", id)
		}
		if kinds := pathKinds(spec); !slices.Contains(kinds, "netpath:broker") || slices.Contains(spec.Host, "netpath:broker") {
			t.Errorf("%s: path kinds %v (catalog host %v), want netpath:broker added", id, kinds, spec.Host)
		}
	}
	spec, _ := probes.Lookup("secrets.broker-token-lifetime")
	if kinds := pathKinds(spec); slices.Contains(kinds, "netpath:broker") {
		t.Errorf("lifetime: path kinds %v, want none added", kinds)
	}
}

// TestEffectiveSeesTheResultsSandbox: the per-result grading (the Ginkgo
// specs') graded a result without its sandbox, so a fact of the runtime's
// view (no network: the box cannot reach the broker) that the run's
// verdict credits was missing; now the result's sandbox goes with it and
// both readings agree.
func TestEffectiveSeesTheResultsSandbox(t *testing.T) {
	g, err := policies.New()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := probes.Lookup("secrets.broker-token-scope")
	res := evidence.Result{Probe: spec.ID, Category: spec.Category, Criterion: spec.Criterion, Severity: spec.Severity,
		Outcome: probes.Blocked, Expected: spec.Expected("no-network-transform"), Sandbox: "box",
		Evidence: []evidence.Item{{Source: "broker", Kind: "scope", Summary: "the broker saw no use of the task's token outside its grant",
			Data: map[string]string{"token_sha256": "ab12", "run": "r", "task": "t"}}}}
	for name, c := range map[string]struct {
		network string
		want    probes.Outcome
	}{"no network": {"none", probes.Blocked}, "a network": {"sandcheck-net", evidence.Unconfirmed}} {
		e := &Engine{log: slog.New(slog.DiscardHandler), grader: g, rec: &evidence.Record{Schema: evidence.Schema, RunID: "20261201t000000-00000000",
			Target:    evidence.Target{Name: "t", Profile: "no-network-transform"},
			Sandboxes: []evidence.Sandbox{{ID: "box", Name: "own", View: &runners.RuntimeView{NetworkMode: c.network}}}}}
		got, err := e.Effective(context.Background(), res)
		if err != nil || got != c.want {
			t.Errorf("%s: effective %s (%v), want %s", name, got, err, c.want)
		}
	}
}
