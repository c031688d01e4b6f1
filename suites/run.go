package suites

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/reports"
)

type recordT = evidence.Record

// DefaultFormats are the reports a run writes unless told otherwise.
var DefaultFormats = []string{"json", "junit", "markdown", "sarif", "html"}

// finish closes the engine, grades the record with the release policy and
// writes the reports. The verdict comes from Rego, never from Go.
func finish(ctx context.Context, e *Engine) (*Outcome, error) {
	defer e.CloseStream()
	rec := e.Finish(ctx)
	o := &Outcome{Record: rec, HarnessErrors: rec.Errors}
	rec.Tool.PolicyVersion = e.grader.Version()
	v, err := e.grader.Grade(ctx, rec)
	if err != nil {
		return o, fmt.Errorf("grading: %w", err)
	}
	rec.Verdict = v
	e.Emit("verdict", v)
	formats := e.cfg.Formats
	if len(formats) == 0 {
		formats = DefaultFormats
	}
	if o.Reports, err = reports.WriteAll(e.cfg.OutDir, rec, formats); err != nil {
		return o, fmt.Errorf("writing reports: %w", err)
	}
	return o, nil
}

// failer satisfies ginkgo's GinkgoTestingT for in-process runs.
type failer struct{ failed bool }

func (f *failer) Fail() { f.failed = true }

// ErrHarness marks runs in which the harness could not do its job.
var ErrHarness = errors.New("harness error")

// Run executes the compiled-in specs in-process against cfg's target, the
// same specs `ginkgo ./suites` runs, and returns the graded outcome. It can
// be called once per process (Ginkgo's suite is global).
func Run(ctx context.Context, cfg Config, reporter ReporterOptions) (*Outcome, error) {
	sel, err := Select(cfg.Probes, cfg.LabelFilter)
	if err != nil {
		return nil, err
	}
	if cfg.OutDir, err = filepath.Abs(cfg.OutDir); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	cfg.Selected = sel
	active = cfg
	sc, rc := ginkgo.GinkgoConfiguration()
	sc.FocusStrings = focusFor(sel)
	if cfg.LabelFilter != "" {
		sc.LabelFilter = cfg.LabelFilter
	}
	sc.FailOnEmpty = true
	sc.Timeout = reporter.Timeout
	rc.Succinct = !reporter.Verbose
	rc.Verbose = reporter.Verbose
	rc.SilenceSkips = true
	rc.NoColor = reporter.NoColor
	if reporter.GinkgoJUnit != "" {
		rc.JUnitReport = reporter.GinkgoJUnit
	}
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(&failer{}, "sandcheck", sc, rc)
	o := finished
	if o == nil {
		return nil, fmt.Errorf("%w: the run ended before it finished (interrupted?)", ErrHarness)
	}
	return o, nil
}

// ReporterOptions shape the progress Ginkgo prints while a run goes.
type ReporterOptions struct {
	Verbose, NoColor bool
	GinkgoJUnit      string
	Timeout          time.Duration
}
