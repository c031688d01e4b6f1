package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// Grader evaluates run records against the release criteria: the embedded
// policy, any user policies and waivers. The policy is compiled once, by New;
// a Grader is safe for concurrent use.
type Grader struct {
	query rego.PreparedEvalQuery
	// refused, with user policies only, lists the pass findings of user
	// policies for built-in criteria (userRefusals).
	refused     *rego.PreparedEvalQuery
	user        []module
	criteria    []string
	userVersion string
	now         func() time.Time
	budget      time.Duration
}

// EvalBudget is how long one grading may evaluate by default: the embedded
// policy needs well under a second, so only a runaway user policy (say
// numbers.range(1, 1e8)) meets it.
const EvalBudget = 30 * time.Second

// ErrPolicyRuntime is wrapped by a grading the policy could not finish: a
// built-in function failed (strict built-in errors: a runtime error never
// silently leaves a rule undefined) or the evaluation ran past its budget.
var ErrPolicyRuntime = errors.New("policy runtime error")

// Option configures a Grader.
type Option func(*config)

type config struct {
	specs   []probes.Spec
	dirs    []string
	waivers []Waiver
	now     func() time.Time
	budget  time.Duration
}

// WithEvalBudget bounds each grading's evaluation time (default EvalBudget).
func WithEvalBudget(d time.Duration) Option {
	return func(c *config) { c.budget = d }
}

// WithCatalog grades against specs instead of probes.Catalog(). The criteria
// and their order stay probes.Criteria. Meant for tests and for catalogs
// that extend the built-in one.
func WithCatalog(specs []probes.Spec) Option {
	return func(c *config) { c.specs = specs }
}

// WithPolicies adds user policies: each path is a folder of Rego modules and
// data files or an OPA bundle (.tar.gz). They add rules in package
// sandcheck.user (or below, or outside sandcheck) and data outside the
// reserved roots; they never replace or add to the release policy, its
// criteria or profiles (New refuses such a module, naming its file and
// line), and they may not call built-ins that reach the network or the host.
// Test modules (*_test.rego) are not loaded for grading.
func WithPolicies(paths ...string) Option {
	return func(c *config) { c.dirs = append(c.dirs, paths...) }
}

// WithWaivers applies waivers (see LoadWaivers).
func WithWaivers(ws []Waiver) Option {
	return func(c *config) { c.waivers = append(c.waivers, ws...) }
}

// WithClock sets the clock waivers expire by (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// New loads and compiles the policy (strictly, as `opa check --strict`
// would) and prepares its query. Errors name the file and line at fault.
func New(opts ...Option) (*Grader, error) {
	cfg := config{now: time.Now, budget: EvalBudget}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.specs == nil {
		cfg.specs = probes.Catalog()
	}
	criteria := append([]string(nil), probes.Criteria...)
	builtin, user, userData, err := assemble(cfg.dirs)
	if err != nil {
		return nil, err
	}
	mods := append(builtin, user...)
	userVersion := userDigest(user, userData)
	store := map[string]any{
		"catalog": catalogData(criteria, cfg.specs),
		"grading": map[string]any{"policy_version": Version, "user_policy_version": userVersion, "waivers": waiverData(cfg.waivers)},
	}
	for k, v := range userData {
		if _, taken := store[k]; taken {
			return nil, fmt.Errorf("loading user policy data: data.%s is reserved for sandcheck", k)
		}
		store[k] = v
	}
	base := []func(*rego.Rego){
		rego.Store(inmem.NewFromObject(store)),
		rego.SetRegoVersion(ast.RegoV1),
		rego.Strict(true),
		rego.StrictBuiltinErrors(true),
		rego.Capabilities(capabilities()),
	}
	var modOpts []func(*rego.Rego)
	for _, m := range mods {
		modOpts = append(modOpts, rego.Module(m.file, m.src))
	}
	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		opts := append(append(slices.Clone(base), rego.Query(query)), modOpts...)
		return rego.New(opts...).PrepareForEval(context.Background())
	}
	q, err := prepare(Query)
	if err != nil {
		return nil, fmt.Errorf("compiling release policy: %w", err)
	}
	if err := checkProfilePatterns(context.Background(), base, mods); err != nil {
		return nil, err
	}
	g := &Grader{query: q, user: user, criteria: criteria, userVersion: userVersion, now: cfg.now, budget: cfg.budget}
	if len(user) > 0 {
		rq, err := prepare(refusedQuery)
		if err != nil {
			return nil, fmt.Errorf("compiling release policy: %w", err)
		}
		g.refused = &rq
	}
	return g, nil
}

// Version identifies the release policy this grader applies: always the
// embedded one (the package Version), since user policies can only add to it.
func (g *Grader) Version() string { return Version }

// UserVersion identifies the user policies this grader adds (their modules
// and data, see WithPolicies); "" when there are none.
func (g *Grader) UserVersion() string { return g.userVersion }

// Stamp writes into t the policies this grader grades with, so a record
// (a live run's or a re-graded one's) names the release policy and the user
// policies its verdict comes from.
func (g *Grader) Stamp(t *evidence.Tool) {
	t.PolicyVersion = g.Version()
	t.UserPolicyVersion = g.userVersion
}

// Grade evaluates rec and returns the policy's verdict. It does not modify
// rec; any verdict rec already carries is ignored. An error means the record
// could not be graded (wrong schema, policy failure), never that the sandbox
// failed: that is a verdict with Pass false.
func (g *Grader) Grade(ctx context.Context, rec *evidence.Record) (*evidence.Verdict, error) {
	if rec == nil {
		return nil, errors.New("grading record: record is nil")
	}
	if rec.Schema != evidence.Schema {
		return nil, fmt.Errorf("grading record: schema %q is not %q", rec.Schema, evidence.Schema)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	input, err := toInput(rec)
	if err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	rs, err := g.eval(ctx, input)
	if err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("grading record %s: policy gave %d results, want one verdict", rec.RunID, len(rs))
	}
	v, err := decodeVerdict(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	if err := g.check(v); err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	if err := g.userRefusals(ctx, input); err != nil {
		return nil, fmt.Errorf("grading record %s: %w", rec.RunID, err)
	}
	return v, nil
}

// eval runs the prepared query within the grader's budget. A built-in
// function's error stops the evaluation (rather than leaving its rule
// undefined, which could drop a deny).
func (g *Grader) eval(ctx context.Context, input map[string]any) (rego.ResultSet, error) {
	return g.evalQuery(ctx, g.query, input)
}

func (g *Grader) evalQuery(ctx context.Context, q rego.PreparedEvalQuery, input map[string]any) (rego.ResultSet, error) {
	ectx, cancel := context.WithTimeout(ctx, g.budget)
	defer cancel()
	rs, err := q.Eval(ectx, rego.EvalInput(input), rego.EvalTime(g.now()))
	switch {
	case err != nil && ectx.Err() != nil && ctx.Err() == nil:
		return nil, fmt.Errorf("%w: evaluating policy: stopped after its budget of %s (a user policy that evaluates without bound?): %w", ErrPolicyRuntime, g.budget, err)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("evaluating policy: %w", err)
	case err != nil:
		return nil, fmt.Errorf("%w: evaluating policy: %w", ErrPolicyRuntime, err)
	}
	return rs, nil
}

// toInput turns the record into the plain JSON value the policy reads.
func toInput(rec *evidence.Record) (map[string]any, error) {
	r := *rec
	r.Verdict = nil // the policy decides; a verdict in the input is noise
	b, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("encoding record: %w", err)
	}
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decoding record: %w", err)
	}
	return in, nil
}

// decodeVerdict reads the policy's output strictly, so a policy that drifts
// from evidence.Verdict is an error rather than a silently empty field.
func decodeVerdict(val any) (*evidence.Verdict, error) {
	b, err := json.Marshal(val)
	if err != nil {
		return nil, fmt.Errorf("encoding policy verdict: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v evidence.Verdict
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding policy verdict: %w", err)
	}
	return &v, nil
}

// check verifies the verdict's shape (not its content): every criterion, in
// order, each with a known status.
func (g *Grader) check(v *evidence.Verdict) error {
	if len(v.Criteria) < len(g.criteria) {
		return fmt.Errorf("policy verdict lists %d criteria, want at least %d", len(v.Criteria), len(g.criteria))
	}
	for i, c := range v.Criteria {
		if i < len(g.criteria) && c.ID != g.criteria[i] {
			return fmt.Errorf("policy verdict lists criterion %q at %d, want %q", c.ID, i, g.criteria[i])
		}
		switch c.Status {
		case evidence.StatusPass, evidence.StatusFail, evidence.StatusUnconfirmed, evidence.StatusNotTested, evidence.StatusWaived:
		default:
			return fmt.Errorf("policy verdict gives criterion %q unknown status %q", c.ID, c.Status)
		}
	}
	return nil
}
