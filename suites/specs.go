package suites

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandcheck/sandcheck/probes"
)

// engine is the suite's engine, created in BeforeSuite from the active config.
var engine *Engine

// finished is the record of the last finished run, for the CLI.
var finished *Outcome

// Outcome is what a finished run leaves: the graded record and where the
// reports went.
type Outcome struct {
	Record  *recordT
	Reports []string
	// HarnessErrors are failures of the harness itself (exit code 2).
	HarnessErrors []string
}

// The tree: one Describe per category, one It per probe. Labels come from
// the catalog's closed vocabulary; the probe ID is the spec text, so focus
// and reports name probes exactly.
var _ = Describe("sandcheck", func() {
	BeforeEach(func() {
		if engine == nil {
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
				It(spec.ID, Label(spec.AllLabels()...), SpecTimeout(specTimeout(spec)), func(ctx SpecContext) {
					res := engine.Run(ctx, spec)
					eff, err := engine.Effective(ctx, res)
					Expect(err).NotTo(HaveOccurred(), "grading %s", spec.ID)
					Expect(eff).To(Equal(res.Expected),
						"%s: the %s profile expects %s but the policy grades it %s (the probe reported %s: %s)",
						spec.ID, engine.target.Profile, res.Expected, eff, res.Outcome, res.Detail)
				})
			}
		})
	}
})

var setupErr = "BeforeSuite did not run"

var _ = BeforeSuite(func(ctx SpecContext) {
	if len(active.Selected) == 0 {
		sc, _ := GinkgoConfiguration()
		sel, err := Select(active.Probes, sc.LabelFilter)
		Expect(err).NotTo(HaveOccurred(), "selecting probes")
		active.Selected = sel
	}
	e, err := NewEngine(ctx, active)
	if err != nil {
		setupErr = err.Error()
		finished = &Outcome{HarnessErrors: []string{err.Error()}}
		Fail(fmt.Sprintf("setting up the run: %v", err))
	}
	engine = e
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if engine == nil {
		return
	}
	o, err := finish(context.WithoutCancel(ctx), engine)
	finished = o
	engine = nil
	Expect(err).NotTo(HaveOccurred(), "finishing the run")
}, NodeTimeout(5*time.Minute))

func byCategory(cat string) []probes.Spec {
	var out []probes.Spec
	for _, s := range probes.Catalog() {
		if s.Category == cat {
			out = append(out, s)
		}
	}
	return out
}

// specTimeout bounds a spec: the probe's own timeout, plus sandbox starts.
func specTimeout(s probes.Spec) time.Duration {
	starts := map[probes.Placement]int{probes.Shared: 1, probes.Own: 1, probes.Sequence: 2, probes.Pair: 2}[s.Sandbox]
	return s.Timeout.D() + time.Duration(starts)*90*time.Second
}
