package engine

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/reports"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// bareRunner can start nothing and lacks every optional capability: any
// probe that reaches Start fails the test.
type bareRunner struct{ t *testing.T }

func (bareRunner) Name() string                       { return "bare" }
func (bareRunner) Capabilities() runners.Capabilities { return runners.Capabilities{Network: true} }
func (r bareRunner) Start(context.Context, runners.SandboxSpec) (runners.Sandbox, error) {
	r.t.Error("Start called for a probe the runner cannot carry out")
	return nil, errors.New("bare runner")
}

// A probe whose needs the runner lacks is not-tested with the reason, is
// never started, and the release policy never grades its criterion a pass.
func TestNotTestedWhenRunnerLacksNeeds(t *testing.T) {
	var spec probes.Spec
	for _, s := range probes.Catalog() {
		if len(s.Requires()) > 0 && s.Sandbox == probes.Own {
			spec = s
			break
		}
	}
	if spec.ID == "" {
		t.Fatal("no catalog probe needs a capability")
	}
	g, err := policies.New()
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{log: slog.New(slog.DiscardHandler), runner: bareRunner{t}, grader: g,
		target: &targets.Target{Name: "t", Profile: "no-network-transform"},
		rec:    &evidence.Record{Schema: evidence.Schema, RunID: "20261201t000000-00000000", Target: evidence.Target{Name: "t", Profile: "no-network-transform"}}}
	res := e.Probe(context.Background(), spec)
	if res.Outcome != probes.NotTested || res.Detail == "" {
		t.Fatalf("%s on a runner without %v: outcome %s (%q), want not-tested with the reason", spec.ID, spec.Requires(), res.Outcome, res.Detail)
	}
	if len(e.rec.Results) != 1 {
		t.Errorf("%d results recorded, want 1", len(e.rec.Results))
	}
	v, err := g.Grade(context.Background(), e.rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Criteria {
		if c.ID == spec.Criterion && c.Status != evidence.StatusUnconfirmed {
			t.Errorf("criterion %s graded %s with its only probe not tested; want unconfirmed", c.ID, c.Status)
		}
	}
	if v.Pass {
		t.Error("a run whose probe was not tested passed")
	}
	// Every report writer takes the not-tested result and names it.
	e.rec.Verdict = v
	dir := t.TempDir()
	paths, err := reports.WriteAll(dir, e.rec, nil)
	if err != nil {
		t.Fatalf("writing reports of a record with a not-tested result: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), spec.ID) {
			t.Errorf("%s does not name the not-tested probe %s", filepath.Base(p), spec.ID)
		}
	}
}
