package engine

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
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
