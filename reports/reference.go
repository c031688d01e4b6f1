package reports

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/probes"
)

// ReferenceSchema identifies a reference result file.
const ReferenceSchema = "sandcheck.dev/reference/v1"

// Reference is what one reference target measures over the whole catalog
// on the project's host (fixtures/references/<target>.yaml): the criteria
// it does not pass, every probe whose effective outcome is not blocked,
// and why each inconclusive cell is one. The end-to-end tests hold a run
// of the target to it; `sandcheck compare --references` publishes an
// inconclusive cell only where it says why.
type Reference struct {
	Schema string `yaml:"schema"`
	Target string `yaml:"target"`
	// Criteria maps each criterion that does not pass to its status.
	Criteria map[string]string `yaml:"criteria"`
	// Outcomes maps a probe whose effective outcome is not blocked to it;
	// "a|b" for a probe that gives either by run. A probe not listed here
	// (nor in Inconclusive) must be blocked.
	Outcomes map[string]string `yaml:"outcomes"`
	// Inconclusive explains each probe that may be inconclusive: why the
	// runner cannot measure it here. It is the only explanation the
	// matrix accepts for an inconclusive cell.
	Inconclusive map[string]string `yaml:"inconclusive"`
}

// maxReferenceBytes bounds one reference file.
const maxReferenceBytes = 256 << 10

// referenceName is a target name as a file name.
var referenceName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// LoadReference reads dir/<target>.yaml and checks it: the schema, the
// target's name, known outcomes, a reason for every inconclusive probe,
// and an inconclusive outcome only where a reason is given.
func LoadReference(dir, target string) (*Reference, error) {
	if !referenceName.MatchString(target) {
		return nil, fmt.Errorf("reading the reference of %q: not a target name", target)
	}
	path := filepath.Join(dir, target+".yaml")
	b, err := bounded.ReadRegular(path, maxReferenceBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the reference of %s: %w", target, err)
	}
	var ref Reference
	if err := yaml.UnmarshalWithOptions(b, &ref, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := ref.check(target); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &ref, nil
}

func (r *Reference) check(target string) error {
	var errs []error
	if r.Schema != ReferenceSchema {
		errs = append(errs, fmt.Errorf("schema %q, want %s", r.Schema, ReferenceSchema))
	}
	if r.Target != target {
		errs = append(errs, fmt.Errorf("target %q, want %q", r.Target, target))
	}
	for p, o := range r.Outcomes {
		for _, w := range strings.Split(o, "|") {
			switch probes.Outcome(w) {
			case probes.Escaped, probes.Blocked, probes.NotApplicable, probes.NotTested, "unconfirmed":
			case probes.Inconclusive:
				if strings.TrimSpace(r.Inconclusive[p]) == "" {
					errs = append(errs, fmt.Errorf("outcomes.%s: inconclusive with no reason under inconclusive", p))
				}
			default:
				errs = append(errs, fmt.Errorf("outcomes.%s: %q is not an outcome", p, w))
			}
		}
	}
	for p, why := range r.Inconclusive {
		if strings.TrimSpace(why) == "" {
			errs = append(errs, fmt.Errorf("inconclusive.%s: no reason", p))
		}
		if o, ok := r.Outcomes[p]; ok && !slices.Contains(strings.Split(o, "|"), string(probes.Inconclusive)) {
			errs = append(errs, fmt.Errorf("inconclusive.%s: explained, but outcomes gives it %s", p, o))
		}
	}
	return errors.Join(errs...)
}

// Allowed is the effective outcomes the reference allows a probe.
func (r *Reference) Allowed(probe string) []probes.Outcome {
	if o, ok := r.Outcomes[probe]; ok {
		var out []probes.Outcome
		for _, w := range strings.Split(o, "|") {
			out = append(out, probes.Outcome(w))
		}
		return out
	}
	if _, ok := r.Inconclusive[probe]; ok {
		return []probes.Outcome{probes.Inconclusive}
	}
	return []probes.Outcome{probes.Blocked}
}

// ExplainInconclusive holds every column to its target's reference in
// dir: an inconclusive cell stands only where the reference says why
// (the reason goes into the column's Explained). A column whose target
// has no reference, or a cell it does not explain, is an error naming the
// column, its target and the probes: the matrix publishes no unexplained
// inconclusive cell.
func (c *Comparison) ExplainInconclusive(dir string) error {
	var errs []error
	for i := range c.Columns {
		col := &c.Columns[i]
		var open []string
		for p, o := range col.Outcome {
			if probes.Outcome(o) == probes.Inconclusive {
				open = append(open, p)
			}
		}
		if len(open) == 0 {
			continue
		}
		sort.Strings(open)
		ref, err := LoadReference(dir, col.Target)
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s (target %s): %d inconclusive cell(s) (%s) and no reference to explain them: %w",
				col.Kind, col.Target, len(open), strings.Join(open, ", "), err))
			continue
		}
		var unexplained []string
		for _, p := range open {
			if why, ok := ref.Inconclusive[p]; ok {
				if col.Explained == nil {
					col.Explained = map[string]string{}
				}
				col.Explained[p] = plain(why)
				continue
			}
			unexplained = append(unexplained, p)
		}
		if len(unexplained) > 0 {
			errs = append(errs, fmt.Errorf("column %s (target %s): %d inconclusive cell(s) the runner should have measured, not explained in %s: %s",
				col.Kind, col.Target, len(unexplained), filepath.Join(dir, col.Target+".yaml"), strings.Join(unexplained, ", ")))
		}
	}
	return errors.Join(errs...)
}

// LinkReports points each column's cells at its run's report page
// (report.html next to its run.json), relative to outDir where the
// comparison is written; a run without one gets no links.
func (c *Comparison) LinkReports(outDir string) error {
	out, err := filepath.Abs(outDir)
	if err != nil {
		return fmt.Errorf("linking the runs' reports: %w", err)
	}
	for i := range c.Columns {
		col := &c.Columns[i]
		if col.Dir == "" {
			continue
		}
		page := filepath.Join(col.Dir, "report.html")
		if fi, err := os.Lstat(page); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		abs, err := filepath.Abs(page)
		if err != nil {
			return fmt.Errorf("linking the runs' reports: %w", err)
		}
		rel, err := filepath.Rel(out, abs)
		if err != nil {
			return fmt.Errorf("linking the runs' reports: %w", err)
		}
		col.Report = filepath.ToSlash(rel)
	}
	return nil
}
