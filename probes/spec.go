package probes

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
)

// Spec declares one probe: what it tries, which release criterion it tests, what
// each profile expects of it and how the harness must run it. Specs are data
// (probes/catalog/*.yaml); the code that carries a probe out lives in probes/impl.
type Spec struct {
	// ID is stable and dotted: category first (metadata.aws-imdsv1).
	ID string `yaml:"id" json:"id"`
	// Category is the PROBES.md family.
	Category string `yaml:"category" json:"category"`
	// Criterion is the one release criterion the probe tests.
	Criterion string `yaml:"criterion" json:"criterion"`
	// Severity of an escape: critical, high, medium, low, info.
	Severity string `yaml:"severity" json:"severity"`
	// Labels beyond the derived ones (category, criterion, severity); each
	// must be in the closed vocabulary (see Labels).
	Labels []string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Description says in one sentence what the probe tries.
	Description string `yaml:"description" json:"description"`
	// Rationale cites the threat the probe stands for.
	Rationale string `yaml:"rationale" json:"rationale"`
	// Remediation says how to make the sandbox block it.
	Remediation string `yaml:"remediation" json:"remediation"`
	// Timeout bounds one run of the probe, harness side.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Bound states the limit a bounded probe stops at (e.g. "256 processes").
	Bound string `yaml:"bound,omitempty" json:"bound,omitempty"`
	// Sandbox says how the harness places the probe: shared (one sandbox for
	// many probes), own (a fresh sandbox of its own), sequence (two
	// sandboxes of the same target, one after the other) or pair (two tasks
	// of the same target, one after the other, placed as the target launches
	// tasks).
	Sandbox Placement `yaml:"sandbox" json:"sandbox"`
	// Expect maps a profile name to the outcome the profile demands; the key
	// "default" applies to profiles not named.
	Expect map[string]Outcome `yaml:"expect" json:"expect"`
	// Host names the host-side evidence that can confirm or contradict the
	// probe: canary:metadata, honeyfile, runtime:<fact>.
	Host []string `yaml:"host,omitempty" json:"host,omitempty"`
	// Informational marks a probe that attempts nothing and only reports
	// facts (the fingerprint family): its outcome is not-applicable on every
	// target, and its expect must say so (default: not-applicable).
	Informational bool `yaml:"informational,omitempty" json:"informational,omitempty"`
	// Needs names what the probe needs of a runner beyond starting a
	// sandbox and running a command in it, from a closed vocabulary
	// (network, inspect, task-launch, host-pid, cpu-meter, residue); a runner
	// that lacks one leaves the probe not-tested. Host evidence that relies
	// on a capability implies it (see Requires).
	Needs []string `yaml:"needs,omitempty" json:"needs,omitempty"`
	// Runners, when set, are the only runners whose sandboxes the probe is
	// about (a platform's own daemons, e.g. opensandbox): in any other
	// sandbox it is not-applicable and expected so, and it is not run.
	Runners []string `yaml:"runners,omitempty" json:"runners,omitempty"`
	// Unproven records why a control cannot exist for the probe: no reference
	// target can let it through (negative) or block it (positive). A probe
	// without a reason must have both controls in the end-to-end tests.
	Unproven *Unproven `yaml:"unproven,omitempty" json:"unproven,omitempty"`
}

// Unproven gives the reason a probe lacks a control; an empty reason means
// the control exists.
type Unproven struct {
	// Negative says why no reference target lets the attempt through.
	Negative string `yaml:"negative,omitempty" json:"negative,omitempty"`
	// Positive says why no reference target blocks it.
	Positive string `yaml:"positive,omitempty" json:"positive,omitempty"`
}

// informationalReason is the recorded reason of every informational probe:
// it attempts nothing, so no target can block it or let it through.
const informationalReason = "informational: the probe attempts nothing, so no target can block it or let it through"

// Controls returns why the probe lacks its negative control (the weak
// reference lets it through) and its positive control (the hardened
// references give what the profile expects); an empty reason means the
// control is claimed and the end-to-end controls must prove it.
func (s Spec) Controls() (negative, positive string) {
	if s.Informational {
		return informationalReason, informationalReason
	}
	if s.Unproven == nil {
		return "", ""
	}
	return s.Unproven.Negative, s.Unproven.Positive
}

// Proven reports whether the probe claims both controls.
func (s Spec) Proven() bool {
	n, p := s.Controls()
	return n == "" && p == ""
}

// Placement is how the harness places a probe in sandboxes.
type Placement string

// The placements.
const (
	Shared   Placement = "shared"
	Own      Placement = "own"
	Sequence Placement = "sequence"
	// Pair runs a plant task and then a check task the way the target hands
	// out tasks: both exec'd into one box when it launches tasks by exec (a
	// pooled box: what the first task leaves, the second meets), each the
	// first process of a fresh box when every task gets its own.
	Pair Placement = "pair"
)

// Expected returns the outcome profile demands of the probe.
func (s Spec) Expected(profile string) Outcome {
	if o, ok := s.Expect[profile]; ok {
		return o
	}
	return s.Expect["default"]
}

// AllLabels returns the probe's labels: category, criterion, severity, then its
// own, sorted and without repeats.
func (s Spec) AllLabels() []string {
	l := append([]string{s.Category, s.Criterion, s.Severity}, s.Labels...)
	sort.Strings(l)
	return slices.Compact(l)
}

// Duration is a time.Duration that reads "30s" in YAML and JSON.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// The closed vocabularies. A name outside them is an error in the catalog.
var (
	Categories = []string{"metadata", "secrets", "host", "privilege", "syscalls", "egress",
		"resources", "persistence", "output", "teardown", "attribution", "fingerprint", "workload", "kubernetes"}
	Criteria = []string{"no-ambient-cloud-identity", "no-host-mount", "bounded-resources",
		"default-deny-egress", "immutable-approved-base", "isolated-scratch", "controlled-output",
		"attributable-policy", "verified-teardown", "hardened-runtime", "usability"}
	Severities = []string{"critical", "high", "medium", "low", "info"}
	// ExtraLabels are labels a spec may carry besides its category, criterion
	// and severity.
	ExtraLabels = []string{"slow", "needs-root", "needs-network", "canary", "own-sandbox", "bounded"}
	Profiles    = []string{"no-network-transform", "package-build", "brokered-data-task",
		"mediated-browser", "high-risk-code", "human-approved-publish"}
)

// Labels returns the whole label vocabulary, sorted.
func Labels() []string {
	var l []string
	for _, v := range [][]string{Categories, Criteria, Severities, ExtraLabels} {
		l = append(l, v...)
	}
	sort.Strings(l)
	return slices.Compact(l)
}

// catalogFS holds the catalog, one file per family, read in file-name order.
//
//go:embed catalog/*.yaml
var catalogFS embed.FS

var (
	catalogOnce sync.Once
	catalog     []Spec
	catalogErr  error
)

// Catalog returns every probe spec, in catalog order. The catalog is embedded
// and checked by tests, so an error here is a build defect.
func Catalog() []Spec {
	catalogOnce.Do(func() { catalog, catalogErr = loadCatalog(catalogFS) })
	if catalogErr != nil {
		panic(catalogErr)
	}
	return catalog
}

// Lookup returns the spec with the given ID.
func Lookup(id string) (Spec, bool) {
	for _, s := range Catalog() {
		if s.ID == id {
			return s, true
		}
	}
	return Spec{}, false
}

// loadCatalog parses every catalog part in file-name order and checks the
// whole: IDs are unique across parts.
func loadCatalog(fsys fs.FS) ([]Spec, error) {
	names, err := fs.Glob(fsys, "catalog/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing probe catalog: %w", err)
	}
	sort.Strings(names)
	var all []Spec
	seen := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("reading probe catalog %s: %w", n, err)
		}
		specs, err := ParseCatalog(b)
		if err != nil {
			return nil, fmt.Errorf("probes/%s: %w", n, err)
		}
		for _, s := range specs {
			if prev, dup := seen[s.ID]; dup {
				return nil, fmt.Errorf("probes/%s: id %s already declared in probes/%s", n, s.ID, prev)
			}
			seen[s.ID] = n
		}
		all = append(all, specs...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("probe catalog is empty")
	}
	return all, nil
}

// ParseCatalog decodes and checks one catalog document.
func ParseCatalog(b []byte) ([]Spec, error) {
	var doc struct {
		Probes []Spec `yaml:"probes"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField()).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding probe catalog: %s", yaml.FormatError(err, false, true))
	}
	seen := map[string]bool{}
	for i, s := range doc.Probes {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("probe catalog entry %d (%s): %w", i, s.ID, err)
		}
		if seen[s.ID] {
			return nil, fmt.Errorf("probe catalog: duplicate id %s", s.ID)
		}
		seen[s.ID] = true
	}
	return doc.Probes, nil
}

func (s Spec) check() error {
	if !idPattern.MatchString(s.ID) {
		return fmt.Errorf("id %q is not dotted lower-case", s.ID)
	}
	if !strings.HasPrefix(s.ID, s.Category+".") {
		return fmt.Errorf("id must start with its category %q", s.Category)
	}
	for _, c := range []struct {
		what, v string
		in      []string
	}{{"category", s.Category, Categories}, {"criterion", s.Criterion, Criteria}, {"severity", s.Severity, Severities}} {
		if !slices.Contains(c.in, c.v) {
			return fmt.Errorf("%s %q is not one of %v", c.what, c.v, c.in)
		}
	}
	for _, l := range s.Labels {
		if !slices.Contains(ExtraLabels, l) {
			return fmt.Errorf("label %q is not registered (allowed: %v)", l, ExtraLabels)
		}
	}
	if s.Description == "" || s.Rationale == "" || s.Remediation == "" {
		return fmt.Errorf("description, rationale and remediation are required")
	}
	if s.Timeout <= 0 {
		return fmt.Errorf("timeout must be positive")
	}
	switch s.Sandbox {
	case Shared, Own, Sequence, Pair:
	default:
		return fmt.Errorf("sandbox %q is not shared, own, sequence or pair", s.Sandbox)
	}
	if s.Unproven != nil && s.Unproven.Negative == "" && s.Unproven.Positive == "" {
		return fmt.Errorf("unproven needs a negative or positive reason")
	}
	for _, n := range s.Needs {
		if !slices.Contains(Needs, n) {
			return fmt.Errorf("needs %q is not one of %s", n, strings.Join(Needs, ", "))
		}
	}
	for _, h := range s.Host {
		if !KnownHostKind(h) {
			return fmt.Errorf("host %q is not a known kind of host evidence (known: %s)", h, strings.Join(HostKinds(), ", "))
		}
		if strings.HasPrefix(h, "teardown:") && s.Sandbox != Own {
			return fmt.Errorf("host %s is checked after the probe's sandbox is closed: sandbox must be own", h)
		}
	}
	if _, ok := s.Expect["default"]; !ok {
		return fmt.Errorf("expect needs a default")
	}
	for p, o := range s.Expect {
		if p != "default" && !slices.Contains(Profiles, p) {
			return fmt.Errorf("expect names unknown profile %q", p)
		}
		if s.Informational && o != NotApplicable {
			return fmt.Errorf("expect %s: an informational probe expects not-applicable, not %q", p, o)
		}
		if !s.Informational && !o.Conclusive() {
			return fmt.Errorf("expect %s: %q is not blocked or escaped", p, o)
		}
	}
	return nil
}

// ExpectedOn is what the profile expects of the probe on a runner's
// sandboxes: not-applicable for a probe of other platforms only, otherwise
// Expected.
func (s Spec) ExpectedOn(runner, profile string) Outcome {
	if !s.AppliesTo(runner) {
		return NotApplicable
	}
	return s.Expected(profile)
}

// AppliesTo reports whether the probe is about sandboxes of the given
// runner (every runner unless the spec names some).
func (s Spec) AppliesTo(runner string) bool {
	return len(s.Runners) == 0 || slices.Contains(s.Runners, runner)
}
