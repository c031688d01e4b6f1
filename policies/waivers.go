package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gobwas/glob"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/sandcheck/sandcheck/internal/yamlbound"
	"github.com/sandcheck/sandcheck/probes"
)

// WaiverSchema identifies the waiver file format.
const WaiverSchema = "sandcheck.dev/waivers/v1"

// maxWaiverFile bounds a waiver file.
const maxWaiverFile = 1 << 20

// Waiver accepts one residual risk: findings against a criterion and/or a
// probe (an ID glob) on one target, owned by someone, for a reason, until a
// date. It excuses deny and unconfirmed findings, never a forged or
// self-contradicting record.
type Waiver struct {
	Criterion string `yaml:"criterion"`
	Probe     string `yaml:"probe"`
	Target    string `yaml:"target"`
	Owner     string `yaml:"owner"`
	Reason    string `yaml:"reason"`
	// Expires is a date (YYYY-MM-DD: the waiver holds through that day,
	// UTC) or an RFC 3339 time (it holds until that instant).
	Expires string `yaml:"expires"`

	// ID is where the waiver is written: "file:line".
	ID string `yaml:"-"`
	// ExpiresAt is the instant the waiver stops applying.
	ExpiresAt time.Time `yaml:"-"`
}

// WaiverError is one problem in a waiver file, at a line when known.
type WaiverError struct {
	File string
	Line int
	Msg  string
}

func (e *WaiverError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ErrInvalidWaiver is wrapped by every waiver validation failure.
var ErrInvalidWaiver = errors.New("invalid waiver")

// DefaultWaiverMaxAge is how far ahead a waiver may expire by default: a
// residual risk is accepted for a quarter, then looked at again.
const DefaultWaiverMaxAge = 90 * 24 * time.Hour

// WaiverRules are what a waiver file is held to beyond its shape.
type WaiverRules struct {
	// AllowCriterion admits waivers of a whole criterion (a criterion
	// without a probe, or a probe glob reaching every probe of a criterion
	// or probes of several). Off by default: eleven such waivers would
	// empty the gate. The verdict warns about each one applied.
	AllowCriterion bool
	// MaxAge bounds how far after Now a waiver may expire (0:
	// DefaultWaiverMaxAge).
	MaxAge time.Duration
	// Now is the load time expiry dates are checked against (nil:
	// time.Now). A waiver already past its date is refused.
	Now func() time.Time
}

// WaiverOption sets a WaiverRules field for LoadWaivers and ParseWaivers.
type WaiverOption func(*WaiverRules)

// AllowCriterionWaivers admits waivers of whole criteria.
func AllowCriterionWaivers(ok bool) WaiverOption {
	return func(r *WaiverRules) { r.AllowCriterion = ok }
}

// WaiverMaxAge sets how far ahead a waiver may expire.
func WaiverMaxAge(d time.Duration) WaiverOption {
	return func(r *WaiverRules) { r.MaxAge = d }
}

// WaiverClock sets the load time expiry dates are checked against.
func WaiverClock(now func() time.Time) WaiverOption {
	return func(r *WaiverRules) { r.Now = now }
}

func waiverRules(opts []WaiverOption) WaiverRules {
	r := WaiverRules{MaxAge: DefaultWaiverMaxAge, Now: time.Now}
	for _, o := range opts {
		o(&r)
	}
	if r.MaxAge <= 0 {
		r.MaxAge = DefaultWaiverMaxAge
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// LoadWaivers reads and checks a waiver file (see ParseWaivers).
func LoadWaivers(path string, opts ...WaiverOption) ([]Waiver, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading waivers: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxWaiverFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading waivers %s: %w", path, err)
	}
	if len(b) > maxWaiverFile {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalidWaiver, path, maxWaiverFile)
	}
	return ParseWaivers(path, b, opts...)
}

var datePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// ParseWaivers decodes and checks a waiver document; name is used in
// errors and waiver IDs. Every required field (target, owner, reason,
// expires, and a probe, or a criterion with AllowCriterionWaivers) must be
// present, and each waiver must expire after the load time and no later
// than the maximum age after it (WaiverRules).
func ParseWaivers(name string, b []byte, opts ...WaiverOption) ([]Waiver, error) {
	rules := waiverRules(opts)
	now := rules.Now()
	if err := checkWaiverShape(name, b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWaiver, err)
	}
	var doc struct {
		Schema  string   `yaml:"schema"`
		Waivers []Waiver `yaml:"waivers"`
	}
	if err := decodeWaiverYAML(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWaiver, yamlError(name, err))
	}
	file := parseWaiverFile(b)
	line := func(path string) int {
		p, err := yaml.PathString(path)
		if err != nil || file == nil {
			return 0
		}
		n, err := p.FilterFile(file)
		if err != nil || n == nil || n.GetToken().Position == nil {
			return 0
		}
		return n.GetToken().Position.Line
	}
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &WaiverError{File: name, Line: line(path), Msg: fmt.Sprintf(format, args...)})
	}
	if doc.Schema != WaiverSchema {
		bad("$.schema", "schema must be %q, got %q", WaiverSchema, doc.Schema)
	}
	for i := range doc.Waivers {
		w := &doc.Waivers[i]
		at := fmt.Sprintf("$.waivers[%d]", i)
		w.ID = fmt.Sprintf("%s:%d", name, line(at))
		for _, f := range []struct{ field, val string }{{"target", w.Target}, {"owner", w.Owner}, {"reason", w.Reason}, {"expires", w.Expires}} {
			if strings.TrimSpace(f.val) == "" {
				bad(at, "waiver %d has no %s (target, owner, reason and expires are required)", i+1, f.field)
			}
		}
		if w.Criterion == "" && w.Probe == "" {
			bad(at, "waiver %d names neither a criterion nor a probe", i+1)
		}
		if w.Criterion != "" && !slices.Contains(probes.Criteria, w.Criterion) {
			bad(at+".criterion", "criterion %q is not one of %v", w.Criterion, probes.Criteria)
		}
		if w.Probe != "" {
			if err := globMatchesAProbe(w.Probe); err != nil {
				bad(at+".probe", "probe %q %v", w.Probe, err)
			} else if wide := criteriaEmptied(w.Probe); wide != "" && !rules.AllowCriterion {
				bad(at+".probe", "probe %q %s: that waives a whole criterion, which needs --allow-criterion-waivers", w.Probe, wide)
			}
		} else if w.Criterion != "" && !rules.AllowCriterion {
			bad(at+".criterion", "waiver %d waives the whole criterion %s: name a probe (or a glob of probes), or pass --allow-criterion-waivers", i+1, w.Criterion)
		}
		if w.Expires != "" {
			t, err := expiry(w.Expires)
			switch {
			case err != nil:
				bad(at+".expires", "expires %q: %v", w.Expires, err)
			case !t.After(now):
				bad(at+".expires", "expires %q is already past: remove the waiver or renew it", w.Expires)
			case t.After(now.Add(rules.MaxAge)):
				bad(at+".expires", "expires %q is more than %d days ahead (the most a waiver may run; --waiver-max-days changes it)", w.Expires, int(rules.MaxAge.Hours()/24))
			}
			w.ExpiresAt = t
		}
	}
	if len(errs) == 0 && !rules.AllowCriterion {
		for _, e := range setsEmptying(doc.Waivers) {
			errs = append(errs, &WaiverError{File: name, Line: e.line, Msg: e.msg})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWaiver, errors.Join(errs...))
	}
	return doc.Waivers, nil
}

// setEmptying is a set of waivers that together reach every probe of a
// criterion, at the line of the last of them.
type setEmptying struct {
	line int
	msg  string
}

// setsEmptying judges the waivers together, the way the policy applies
// them: per target, the probe globs that may apply to a criterion (their
// criterion unset or that one) are expanded against the catalog, and where
// their union is every probe of the criterion the set waives it whole,
// however each waiver reads alone (teardown.[a-m]* and teardown.[n-z]*, or
// one waiver per probe). Each waiver must already have passed its own
// checks.
func setsEmptying(ws []Waiver) []setEmptying {
	byCriterion := map[string][]string{}
	for _, s := range probes.Catalog() {
		byCriterion[s.Criterion] = append(byCriterion[s.Criterion], s.ID)
	}
	var targets []string
	for _, w := range ws {
		if !slices.Contains(targets, w.Target) {
			targets = append(targets, w.Target)
		}
	}
	var out []setEmptying
	for _, tg := range targets {
		for _, c := range probes.Criteria {
			ids := byCriterion[c]
			covered := map[string]bool{}
			var by []string
			line := 0
			for _, w := range ws {
				if w.Target != tg || w.Probe == "" || (w.Criterion != "" && w.Criterion != c) {
					continue
				}
				g, err := glob.Compile(w.Probe, '.')
				if err != nil {
					continue
				}
				hit := false
				for _, id := range ids {
					if g.Match(id) {
						covered[id], hit = true, true
					}
				}
				if hit {
					by = append(by, w.ID)
					line = max(line, waiverLine(w.ID))
				}
			}
			if len(ids) == 0 || len(covered) < len(ids) {
				continue
			}
			out = append(out, setEmptying{line: line, msg: fmt.Sprintf(
				"waivers %s for target %q together match every probe of criterion %s (%d): that waives the whole criterion, which needs --allow-criterion-waivers",
				strings.Join(by, ", "), tg, c, len(ids))})
		}
	}
	return out
}

// waiverLine reads the line of a waiver's ID ("file:line"); 0 when it has
// none.
func waiverLine(id string) int {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return 0
	}
	n := 0
	if _, err := fmt.Sscanf(id[i+1:], "%d", &n); err != nil {
		return 0
	}
	return n
}

// globMatchesAProbe checks a waiver's probe glob the way the policy matches
// it (glob.match with "." as the separator) against the probe catalog: a
// glob that matches no probe would waive nothing, silently.
func globMatchesAProbe(p string) error {
	g, err := glob.Compile(p, '.')
	if err != nil {
		return fmt.Errorf("is not a glob: %w", err)
	}
	for _, s := range probes.Catalog() {
		if g.Match(s.ID) {
			return nil
		}
	}
	return errors.New("matches no probe in the catalog (see `sandcheck probes list`); note that * does not cross a '.'")
}

// criteriaEmptied says how a probe glob reaches as far as a criterion
// waiver: it matches probes of more than one criterion, or every probe of
// one. "" when it stays within part of one criterion.
func criteriaEmptied(p string) string {
	g, err := glob.Compile(p, '.')
	if err != nil {
		return ""
	}
	matched, total := map[string]int{}, map[string]int{}
	for _, s := range probes.Catalog() {
		total[s.Criterion]++
		if g.Match(s.ID) {
			matched[s.Criterion]++
		}
	}
	if len(matched) > 1 {
		cs := make([]string, 0, len(matched))
		for c := range matched {
			cs = append(cs, c)
		}
		slices.Sort(cs)
		return fmt.Sprintf("matches probes of %d criteria (%s)", len(cs), strings.Join(cs, ", "))
	}
	for c, n := range matched {
		if n == total[c] {
			return fmt.Sprintf("matches every probe of criterion %s", c)
		}
	}
	return ""
}

// checkWaiverShape bounds the file before the YAML parser sees it (size,
// nesting, aliases) and wants exactly one document.
func checkWaiverShape(name string, b []byte) error {
	lim := yamlbound.Default
	lim.MaxBytes = maxWaiverFile
	sh, err := yamlbound.Check(b, lim)
	var be *yamlbound.Error
	switch {
	case errors.As(err, &be):
		return &WaiverError{File: name, Line: be.Line, Msg: be.Msg}
	case err != nil:
		return &WaiverError{File: name, Msg: err.Error()}
	case sh.Documents == 0:
		return &WaiverError{File: name, Msg: "the file is empty (no YAML document)"}
	case sh.Documents > 1:
		return &WaiverError{File: name, Msg: fmt.Sprintf("holds %d YAML documents; a waiver file holds exactly one", sh.Documents)}
	}
	return nil
}

// decodeWaiverYAML decodes strictly; a panic of the YAML library on
// malformed input is a malformed file, not a crash.
func decodeWaiverYAML(b []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML decoder failed on this file (%v)", p)
		}
	}()
	return yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField()).Decode(v)
}

// parseWaiverFile parses for line numbers; nil when the library fails.
func parseWaiverFile(b []byte) (f *ast.File) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	f, _ = parser.ParseBytes(b, 0)
	return f
}

// expiry reads a date (valid through that day, UTC) or an RFC 3339 time.
func expiry(s string) (time.Time, error) {
	if datePattern.MatchString(s) {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("parsing date: %w", err)
		}
		return d.AddDate(0, 0, 1), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a date (2006-01-02) or an RFC 3339 time")
	}
	return t, nil
}

func yamlError(name string, err error) error {
	var se yaml.Error
	if errors.As(err, &se) {
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			return &WaiverError{File: name, Line: tk.Position.Line, Msg: se.GetMessage()}
		}
		return &WaiverError{File: name, Msg: se.GetMessage()}
	}
	return &WaiverError{File: name, Msg: err.Error()}
}

// lastNanoInstant is the latest instant Rego's time functions can represent
// (int64 nanoseconds since 1970, in 2262). A waiver that expires later is
// handed to the policy as expiring then: past it, time.parse_rfc3339_ns fails,
// and a failing built-in must not silently drop the waiver.
var lastNanoInstant = time.Unix(0, 1<<63-1).UTC().Truncate(time.Second)

// waiverData is the waivers as the policy reads them (data.grading.waivers).
func waiverData(ws []Waiver) []any {
	out := make([]any, len(ws))
	for i, w := range ws {
		at := w.ExpiresAt
		if at.After(lastNanoInstant) {
			at = lastNanoInstant
		}
		out[i] = map[string]any{
			"id": w.ID, "criterion": w.Criterion, "probe": w.Probe, "target": w.Target,
			"owner": w.Owner, "reason": w.Reason, "expires": w.Expires,
			"expires_at": at.UTC().Format(time.RFC3339Nano),
		}
	}
	return out
}
