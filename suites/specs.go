// Package suites holds the Ginkgo tree for teams that already use Ginkgo:
// one It per catalog probe, labelled from the closed vocabulary, each
// carrying out its probe through the engine. `sandcheck run` drives the
// engine directly; `ginkgo ./suites -- --target=F` runs the same probes as
// Ginkgo specs.
package suites

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/probes"
	// The runner backends a target may name.
	_ "github.com/sandcheck/sandcheck/runners/all"
)

// Declare declares the tree for one run with cfg: BeforeSuite starts the
// engine (on the probes cfg selects, or Ginkgo's label filter when cfg
// selects none), one It per probe, AfterSuite grades the run and writes its
// reports. done, if set, receives the outcome. Call it before RunSpecs; the
// engine lives in this call's closure, not in the package.
func Declare(cfg engine.Config, done func(*engine.Outcome, error)) {
	var e *engine.Engine
	setupErr := "BeforeSuite did not run"
	BeforeSuite(func(ctx SpecContext) {
		if len(cfg.Selected) == 0 {
			sc, _ := GinkgoConfiguration()
			sel, err := engine.Select(cfg.Probes, sc.LabelFilter)
			Expect(err).NotTo(HaveOccurred(), "selecting probes")
			cfg.Selected = sel
		}
		var err error
		if e, err = engine.New(ctx, cfg); err != nil {
			setupErr = err.Error()
			if done != nil {
				done(&engine.Outcome{HarnessErrors: []string{err.Error()}}, err)
			}
			Fail(fmt.Sprintf("setting up the run: %v", err))
		}
	}, NodeTimeout(5*time.Minute))

	Describe("sandcheck", func() {
		BeforeEach(func() {
			if e == nil {
				Fail("the engine is not set up: " + setupErr)
			}
		})
		for _, cat := range probes.Categories {
			specs := byCategory(cat)
			if len(specs) == 0 {
				continue
			}
			Describe(cat, func() {
				for _, spec := range specs {
					It(spec.ID, Label(spec.AllLabels()...), SpecTimeout(engine.SpecTimeout(spec)), func(ctx SpecContext) {
						res := e.Probe(ctx, spec)
						eff, err := e.Effective(ctx, res)
						Expect(err).NotTo(HaveOccurred(), "grading %s", spec.ID)
						Expect(eff).To(Equal(res.Expected),
							"%s: the %s profile expects %s but the policy grades it %s (the probe reported %s: %s)",
							spec.ID, e.Target().Profile, res.Expected, eff, res.Outcome, res.Detail)
					})
				}
			})
		}
	})

	AfterSuite(func(ctx SpecContext) {
		if e == nil {
			return
		}
		o, err := e.Conclude(context.WithoutCancel(ctx))
		if done != nil {
			done(o, err)
		}
		Expect(err).NotTo(HaveOccurred(), "finishing the run")
	}, NodeTimeout(5*time.Minute))
}

func byCategory(cat string) []probes.Spec {
	var out []probes.Spec
	for _, s := range probes.Catalog() {
		if s.Category == cat {
			out = append(out, s)
		}
	}
	return out
}
