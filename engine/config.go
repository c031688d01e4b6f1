// Package engine is sandcheck's one way through a run: plan (select the
// probes), start (run folder, host canaries, harness network, the runner the
// target names), probe, observe (host evidence joined to each result), grade
// (the release policy in Rego) and report. It never names a runner's
// package: runners come from the runners factory, and what only some
// runners can do is found through optional interfaces.
package engine

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/internal/labelfilter"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probebin"
	"github.com/sandcheck/sandcheck/probes"
)

// Config is what one run needs.
type Config struct {
	// TargetPath is the target file.
	TargetPath string
	// OutDir receives evidence.jsonl, run.json and the reports.
	OutDir string
	// ProbeBinary is the static sandcheck-probe to deliver into sandboxes.
	ProbeBinary string
	// Probes is a glob over probe IDs ("" = all).
	Probes string
	// LabelFilter is a label expression in Ginkgo's syntax ("" = all; see
	// internal/labelfilter).
	LabelFilter string
	// Formats are the report formats to write.
	Formats []string
	// StartedBy names who started the run (for attribution).
	StartedBy string
	// Version is the sandcheck build.
	Version string
	// Logger receives the engine's logs; nil discards.
	Logger *slog.Logger
	// StartTimeout bounds each sandbox start.
	StartTimeout time.Duration
	// Selected are the probes the run will carry out (set by Run from Probes
	// and LabelFilter); task-mode batches hold exactly these.
	Selected []probes.Spec
	// PolicyPaths are user policies (folders or OPA bundles) graded with the
	// embedded release criteria (see policies.WithPolicies).
	PolicyPaths []string
	// Waivers is a waiver file ("" = none).
	Waivers string
	// AllowCriterionWaivers admits waivers of a whole criterion (refused
	// otherwise: a waiver per criterion would empty the gate).
	AllowCriterionWaivers bool
	// WaiverMaxDays bounds how far ahead a waiver may expire (0: the
	// policy's default, 90 days).
	WaiverMaxDays int
	// NoTrace leaves the sandboxes unwatched by the eBPF tracer, which is
	// otherwise used wherever it is available (the record says why when it
	// is not). The zero value traces, so callers that predate it keep doing so.
	NoTrace bool
	// Progress, if set, is told of each result as its probe finishes.
	Progress Progress
	// Provenance is what the supply-chain check verified of the target's
	// image before the run (nil: the target asks for no verification); the
	// record carries it from its first event, so the policy grades the run
	// against the verified image.
	Provenance *evidence.Provenance
	// Parallel is how many sandboxes of their own the run's probes may
	// hold at once (0 or 1: one probe at a time, in catalog order).
	Parallel int
	// Grader, if set, is the release grader the run grades with, already
	// built by the caller from this configuration (NewGrader), so the
	// policies are compiled once; nil builds it.
	Grader *policies.Grader
	// HangProbe is for tests only: the probe binary hangs before running
	// this probe (probes.Params.HangBefore), to check how a hung task is
	// cut. Empty in every real run; the CLI never sets it.
	HangProbe string
	// StartAllowance is for tests only: what each probe's deadline allows
	// for each of its sandbox starts (SpecTimeout's 90 s when 0), so a
	// test of how deadlines and budgets meet waits seconds, not minutes.
	// The CLI never sets it.
	StartAllowance time.Duration
	// Pool narrows a fleet target (kubernetes pools) to one of its pools
	// ("" = the target as it is).
	Pool string
}

// NewGrader builds the release grader a run with this configuration uses:
// the embedded criteria, the user policies and the waivers. Errors name the
// file and line at fault.
func (c Config) NewGrader() (*policies.Grader, error) {
	opts := []policies.Option{policies.WithPolicies(c.PolicyPaths...)}
	if c.Waivers != "" {
		ws, err := policies.LoadWaivers(c.Waivers, policies.AllowCriterionWaivers(c.AllowCriterionWaivers),
			policies.WaiverMaxAge(time.Duration(c.WaiverMaxDays)*24*time.Hour))
		if err != nil {
			return nil, err
		}
		opts = append(opts, policies.WithWaivers(ws))
	}
	return policies.New(opts...)
}

// DefaultProbeBinary finds sandcheck-probe: $SANDCHECK_BIN, then next to the
// running executable, then ./bin, then the copy embedded in this binary
// (written out to the user's cache). When none is usable it returns ./bin's
// path, whose open error then says what is missing.
func DefaultProbeBinary() string {
	var cands []string
	if d := os.Getenv("SANDCHECK_BIN"); d != "" {
		cands = append(cands, filepath.Join(d, "sandcheck-probe"))
	}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "sandcheck-probe"))
	}
	cands = append(cands, filepath.Join("bin", "sandcheck-probe"))
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	if p, err := probebin.Path(); err == nil {
		return p
	}
	return cands[len(cands)-1]
}

// Select returns the catalog specs a probe glob (or a comma-separated list
// of globs) and a label filter choose. An unknown label, a malformed
// filter, a glob of a list that matches no probe or a selection that
// matches nothing is an error, so a typo never turns into an empty,
// passing run or a silently shorter one.
func Select(glob, labelFilter string) ([]probes.Spec, error) {
	var match func([]string) bool = func([]string) bool { return true }
	if labelFilter != "" {
		for _, tok := range regexp.MustCompile(`[A-Za-z0-9_.:-]+`).FindAllString(labelFilter, -1) {
			if !slices.Contains(probes.Labels(), tok) {
				return nil, fmt.Errorf("label filter %q: unknown label %q (known: %s)", labelFilter, tok, strings.Join(probes.Labels(), ", "))
			}
		}
		f, err := labelfilter.Parse(labelFilter)
		if err != nil {
			return nil, err
		}
		match = f
	}
	var globs []string
	if glob != "" {
		globs = strings.Split(glob, ",")
	}
	hits := make([]int, len(globs))
	for i, g := range globs {
		if g = strings.TrimSpace(g); g == "" {
			return nil, fmt.Errorf("probe pattern %q: an empty pattern in the comma-separated list", glob)
		}
		globs[i] = g
		if _, err := filepath.Match(g, ""); err != nil {
			return nil, fmt.Errorf("probe pattern %q: %w", g, err)
		}
	}
	var out []probes.Spec
	for _, s := range probes.Catalog() {
		chosen := len(globs) == 0
		for i, g := range globs {
			if ok, _ := filepath.Match(g, s.ID); ok {
				hits[i]++
				chosen = true
			}
		}
		if chosen && match(s.AllLabels()) {
			out = append(out, s)
		}
	}
	for i, g := range globs {
		if hits[i] == 0 && len(globs) > 1 {
			return nil, fmt.Errorf("probe pattern %q (in %q) matches no probe; see `sandcheck probes list`", g, glob)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no probe matches (probes %q, label filter %q); see `sandcheck probes list`", glob, labelFilter)
	}
	return out, nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}
