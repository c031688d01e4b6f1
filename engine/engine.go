package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/internal/owner"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/policies"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// Engine runs probes against one target and gathers the run record. It owns
// every sandbox, the harness network and the run's temporary folder, and
// Close releases all of them.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	target *targets.Target
	runner runners.Runner
	net    *netharness.Network
	stream *evidence.Stream
	runDir string // the run's own host folder (probe copy, host share)
	probes string // host folder holding only the probe binary
	honey  *honey
	creds  *creds // the planted credential home and other honeytokens (creds.go)
	grader *policies.Grader
	trace  *runTrace   // the eBPF tracer's part of the run (suites/trace.go)
	out    *outputPath // the target's output release path (suites/output.go)
	in     *inputsPath // the target's inputs folder (suites/inputs.go)
	broker *brokerRun  // the target's broker (broker.go)

	// The other host-side canaries (honey_canary.go).
	proc      *canaryProc  // the canary process on the host
	block     *blockCanary // the loop device, when the target maps it
	hostHoney string       // the honeyfile in the run folder

	mu      sync.Mutex
	rec     *evidence.Record
	shared  *sandbox
	harness []string // harness errors: the run could not do its job
	// streamErr is the first failure to write the evidence stream: the
	// run's evidence is incomplete, which is the harness's failure.
	streamErr error
	closed    bool
	started   time.Time
	mountSrc  []targets.Mount

	// phases are the batches of two-phase probes (pair.go), by phaseKey.
	phases map[string]*phaseBatch

	// ahead are the sandboxes started ahead of their probes (ahead.go);
	// closing counts the sandboxes being removed in the background.
	ahead   aheads
	closing sync.WaitGroup

	// own are the host's own dials from sandboxes' namespaces (netpath.go).
	own ownDials

	batchOnce sync.Once
	batch     map[string]batchResult // the shared batch's results (batch.go)
	// runCtx is the run's context (set by Run): a batch runs under it, not
	// under the deadline of the probe that asked for it first.
	runCtx context.Context

	// limitOnce makes limitPlan, the limit probes' bounds (limits.go).
	limitOnce sync.Once
	limitPlan *limitPlan
}

type sandbox struct {
	sb   runners.Sandbox
	info *evidence.Sandbox
	view *runners.RuntimeView
	// tokens holds the token each probe ran with (under Engine.mu), for the
	// teardown checks after close.
	tokens map[string]string
	// cpu is the CPU budget watchdog on a one-task sandbox (cpubudget.go).
	cpu *cpuWatch
	// killed is set (under Engine.mu) when the platform killed the sandbox
	// under a probe (runners.KilledError); it is then replaced.
	killed bool
	// paths are the dials from the sandbox's network namespace (netpath.go).
	paths netpaths
	// sight is what the host saw of a one-probe task's plant after the
	// task ended and before the sandbox closed (plant.go); nil when it did
	// not look.
	sight *plantSight
	// kstart is the host's reading of the box's seccomp state at its
	// task's start (task mode; seccompstate.go).
	kstart *seccompCheck
}

// New loads the target, prepares the run folder, the probe delivery
// folder, the harness network (when the target uses it) and the runner.
func New(ctx context.Context, cfg Config) (_ *Engine, err error) {
	tg, err := targets.Load(cfg.TargetPath)
	if err != nil {
		return nil, err
	}
	if cfg.Pool != "" {
		if tg, err = tg.Pool(cfg.Pool); err != nil {
			return nil, err
		}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	e := &Engine{cfg: cfg, log: cfg.logger(), target: tg, started: time.Now()}
	defer func() {
		if err != nil {
			e.Close(context.WithoutCancel(ctx))
			_ = e.CloseStream() // the setup error says why the run ended
		}
	}()
	runID := newRunID()
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output folder: %w", err)
	}
	if e.stream, err = evidence.OpenStream(filepath.Join(cfg.OutDir, "evidence.jsonl")); err != nil {
		return nil, err
	}
	e.rec = &evidence.Record{
		Schema: evidence.Schema, RunID: runID, StartedAt: e.started.UTC(), StartedBy: cfg.StartedBy,
		Tool:   evidence.Tool{Version: cfg.Version},
		Target: evidence.Target{Name: tg.Name, Path: tg.Path, Digest: tg.Digest, Profile: tg.Profile, Egress: tg.EgressProfile()},
		Runner: tg.Runner, Image: evidence.Image{Ref: tg.Image}, Host: hostInfo(),
		Provenance: cfg.Provenance,
	}
	// The platform's identity labels, for attributable-policy (attribution.go).
	e.rec.Target.Attribution = tg.Attribution.Keys()
	e.rec.Runtime = tg.Declared().Runtime
	e.emit("run-start", e.rec)

	if e.runDir, err = os.MkdirTemp("", "sandcheck-run-"); err != nil {
		return nil, fmt.Errorf("creating run folder: %w", err)
	}
	// Owned from the start, whatever the runner: the run's reaper sweeps
	// only the folders that name this process (and a folder without an
	// owner waited for the next run or sandcheck cleanup).
	if err := owner.Mark(e.runDir); err != nil {
		return nil, err
	}
	if e.probes, err = deliverProbe(cfg.ProbeBinary, e.runDir); err != nil {
		return nil, err
	}
	if err := deliverSuidCanary(cfg.ProbeBinary, e.probes); err != nil {
		return nil, err
	}
	if e.creds, err = plantCreds(e.runDir); err != nil {
		return nil, err
	}
	if e.creds.agent, err = serveAgent(e.runDir, func(h canary.Hit) { e.emit("canary-hit", h) }); err != nil {
		return nil, err
	}
	env := runners.RunEnv{RunDir: e.runDir, Logger: e.log, Expand: func(v string) string {
		return e.creds.expand(strings.ReplaceAll(v, targets.RunDirVar, e.runDir))
	}}
	if e.mountSrc, err = tg.ResolveMounts(e.runDir); err != nil {
		return nil, err
	}
	env.Mounts = e.mountSrc
	if tg.UsesBlockCanary() {
		if e.block, err = newBlockCanary(e.runDir); err != nil {
			return nil, err
		}
	}
	var blockPath string
	if e.block != nil {
		blockPath = e.block.path
	}
	if env.Devices, err = tg.ResolveDevices(blockPath); err != nil {
		return nil, err
	}
	if err := e.setupOutput(&env); err != nil {
		return nil, err
	}
	if err := e.setupInputs(&env); err != nil {
		return nil, err
	}
	if d := tg.Declared(); d.Env != nil {
		env.Env = e.creds.expandEnv(d.Env)
	}
	if e.runner, err = runners.Open(ctx, tg, env); err != nil {
		return nil, err
	}
	if ir, ok := e.runner.(runners.ImageResolver); ok {
		if e.rec.Image.Digest, err = ir.ImageDigest(ctx); err != nil {
			return nil, fmt.Errorf("target %s: %w", tg.Path, err)
		}
	}
	if pp, ok := e.runner.(runners.PlatformPeers); ok {
		if err := pp.Prepare(ctx, cfg.Selected); err != nil {
			return nil, fmt.Errorf("target %s: %w", tg.Path, err)
		}
	}
	if hn, ok := e.runner.(runners.HarnessNetworkUser); ok && hn.UsesHarnessNetwork() {
		be, ok := e.runner.(netharness.Backend)
		if !ok {
			return nil, fmt.Errorf("target %s: runner %s asks for the harness network but offers no network backend", tg.Path, e.runner.Name())
		}
		cli, err := be.NetworkAPI(ctx)
		if err != nil {
			return nil, err
		}
		if e.net, err = netharness.Create(ctx, netharness.Options{RunID: runID, Logger: e.log, Docker: cli, Egress: tg.EgressProfile(), KubeTokens: e.creds.kubeTokens()}); err != nil {
			return nil, fmt.Errorf("creating harness network: %w", err)
		}
		e.net.Recorder().OnHit(func(h canary.Hit) { e.emit(e.hitEvent(h), h) }) // netpath.go: the host's own dials apart
		if j, ok := e.runner.(netharness.Joiner); ok {
			j.JoinHarness(e.net)
		}
	}
	if e.broker, err = newBrokerRun(tg, e.net, runID); err != nil {
		return nil, err
	}
	e.honey = newHoney(runID)
	if e.hostHoney, err = e.honey.plantFile(e.runDir); err != nil {
		return nil, err
	}
	if e.proc, err = startCanaryProc(cfg.ProbeBinary); err != nil {
		return nil, err
	}
	e.trace = openTrace(e.log, e.rec, !cfg.NoTrace)
	e.trace.probeBin = filepath.Join(e.probes, runners.ProbeBinary)
	if e.grader = cfg.Grader; e.grader == nil {
		if e.grader, err = cfg.NewGrader(); err != nil {
			return nil, fmt.Errorf("loading release policy: %w", err)
		}
	}
	return e, nil
}

// Effective grades one result alone with the release policy and returns the
// outcome the policy grades it by (host evidence weighed in).
func (e *Engine) Effective(ctx context.Context, res evidence.Result) (probes.Outcome, error) {
	// The result's own sandbox goes with it: what the runtime's view says
	// of it (no network at all) confirms some claims, as in the run's
	// verdict. (Findings about the sandbox itself, its teardown among
	// them, name no probe and leave this result's outcome alone.)
	var sbs []evidence.Sandbox
	e.mu.Lock()
	for _, s := range e.rec.Sandboxes {
		if s.ID == res.Sandbox && res.Sandbox != "" {
			sbs = append(sbs, s)
		}
	}
	e.mu.Unlock()
	v, err := e.grader.Grade(ctx, &evidence.Record{Schema: evidence.Schema, RunID: e.rec.RunID,
		Target: e.rec.Target, Sandboxes: sbs, Results: []evidence.Result{res}})
	if err != nil {
		return "", err
	}
	if len(v.Results) != 1 {
		return "", fmt.Errorf("the policy graded %d results, want 1", len(v.Results))
	}
	return v.Results[0].Effective, nil
}

// Record returns the run record gathered so far.
func (e *Engine) Record() *evidence.Record { return e.rec }

// HarnessErrors lists what kept the harness from doing its job.
func (e *Engine) HarnessErrors() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.harness...)
}

func (e *Engine) harnessError(err error) {
	e.mu.Lock()
	e.harness = append(e.harness, err.Error())
	e.mu.Unlock()
	e.emit("harness-error", err.Error())
	// Debug, not Error: the CLI prints the run's harness errors once at
	// its end, each cause once; an Error log here was one line per probe
	// when the engine stopped (issue 16 item 12).
	e.log.Debug("harness error", "err", err)
}

func (e *Engine) emit(typ string, data any) {
	if err := e.stream.Emit(typ, data); err != nil {
		e.log.Warn("evidence stream", "err", err)
		e.mu.Lock()
		if e.streamErr == nil {
			e.streamErr = err
		}
		e.mu.Unlock()
	}
}

// Probe carries out one probe as its placement says and returns its result
// with all host evidence joined. A harness failure gives an inconclusive
// result and is recorded as a harness error.
func (e *Engine) Probe(ctx context.Context, spec probes.Spec) evidence.Result {
	start := time.Now()
	res := evidence.Result{Probe: spec.ID, Category: spec.Category, Criterion: spec.Criterion,
		Severity: spec.Severity, Expected: spec.ExpectedOn(e.target.Runner, e.target.Profile), Outcome: probes.Inconclusive}
	var err error
	if !spec.AppliesTo(e.target.Runner) {
		// A probe of another platform's own daemons: nothing of it is in
		// this sandbox, and the profile cannot expect otherwise.
		res.Outcome, res.Detail = probes.NotApplicable, fmt.Sprintf("a probe of %s sandboxes only; this target's runner is %s", strings.Join(spec.Runners, ", "), e.target.Runner)
		return e.record(res, start)
	}
	if missing := e.runner.Capabilities().Missing(spec.Requires()); len(missing) > 0 {
		// The runner cannot carry the probe out: not tested, with the
		// reason, which the policy never grades as a pass.
		res.Outcome, res.Detail = probes.NotTested, probes.NotTestedReason(e.runner.Name(), missing)
		return e.record(res, start)
	}
	if why := e.broker.untestableReason(spec); why != "" {
		res.Outcome, res.Detail = probes.NotTested, why
		return e.record(res, start)
	}
	if it, over := e.limitAboveMax(spec); over {
		// The target's limit is above what the profile allows: not run
		// past it, graded from the host's finding (limits.go).
		res.Detail, res.Evidence = it.Summary, append(res.Evidence, it)
		return e.record(res, start)
	}
	switch spec.Sandbox {
	case probes.Shared:
		err = e.runShared(ctx, spec, &res)
	case probes.Own:
		err = e.runOwn(ctx, spec, &res)
	case probes.Sequence, probes.Pair:
		err = e.runPhased(ctx, spec, &res)
	}
	if err != nil {
		res.Outcome, res.Detail = probes.Inconclusive, "harness: "+err.Error()
		e.harnessError(fmt.Errorf("probe %s: %w", spec.ID, err))
	}
	return e.record(res, start)
}

// record adds a finished result to the run record and the stream.
func (e *Engine) record(res evidence.Result, start time.Time) evidence.Result {
	res.Seconds = time.Since(start).Seconds()
	e.mu.Lock()
	e.rec.Results = append(e.rec.Results, res)
	e.rec.Timing.ProbeSeconds += res.Seconds
	e.mu.Unlock()
	e.emit("result", res)
	return res
}

// taskMode reports whether each task is a fresh sandbox's first process.
func (e *Engine) taskMode() bool { return e.target.LaunchMode() == "task" }

// runShared runs a probe that can share a sandbox. In exec mode it is exec'd
// into the run's one long-lived sandbox (restarted if it died); in task mode
// every selected shared probe runs in one batch, the first process of one
// fresh sandbox, and later calls take their result from that batch.
func (e *Engine) runShared(ctx context.Context, spec probes.Spec, res *evidence.Result) error {
	if e.taskMode() {
		return e.fromBatch(ctx, spec, res)
	}
	e.mu.Lock()
	sb := e.shared
	e.mu.Unlock()
	if sb == nil {
		var err error
		if sb, err = e.start(ctx, "shared", nil); err != nil {
			return err
		}
		e.mu.Lock()
		e.shared = sb
		e.mu.Unlock()
	}
	err := e.execOne(ctx, sb, spec, res, "", "")
	e.mu.Lock()
	killed := sb.killed
	e.mu.Unlock()
	if err != nil || killed {
		// The sandbox may have died under the probe; the next probe gets a
		// fresh one rather than inheriting the failure.
		e.mu.Lock()
		e.shared = nil
		e.mu.Unlock()
		e.closeSandbox(sb)
	}
	return err
}

func (e *Engine) runOwn(ctx context.Context, spec probes.Spec, res *evidence.Result) error {
	return e.oneShot(ctx, spec.ID, spec, res, "", "")
}

// oneShot runs one probe in a sandbox of its own and removes it.
func (e *Engine) oneShot(ctx context.Context, name string, spec probes.Spec, res *evidence.Result, marker, phase string) error {
	if !e.taskMode() {
		var sb *sandbox
		var err error
		if a := e.takeAhead(ctx, name); a != nil {
			sb, err = a.sb, a.err
		} else {
			sb, err = e.start(ctx, name, nil)
		}
		if err != nil {
			return err
		}
		e.watchCPU(sb, spec)
		if err := e.startHelpers(ctx, sb, []probes.Spec{spec}); err != nil {
			e.closeSandbox(sb)
			return err
		}
		err = e.execOne(ctx, sb, spec, res, marker, phase)
		if closesQuietly([]probes.Spec{spec}) {
			e.closeLater(sb)
			return err
		}
		freeLane(ctx)
		sight := e.seePlant(ctx, spec, sb) // plant.go: the marker a box with an avenue needs
		e.closeSandbox(sb)
		res.Evidence = append(res.Evidence, e.teardownEvidence(ctx, spec, sb, sight)...)
		res.Evidence = append(res.Evidence, e.brokerAfterClose(spec, sb)...)
		return err
	}
	reports, token, sb, err := e.runTask(ctx, name, []probes.Spec{spec}, marker, phase)
	if err != nil {
		return err
	}
	e.fill(spec, res, reports[spec.ID], token, sb)
	res.Evidence = append(res.Evidence, e.teardownEvidence(ctx, spec, sb, sb.sight)...)
	res.Evidence = append(res.Evidence, e.brokerAfterClose(spec, sb)...)
	return nil
}

// fromBatch runs, once, every selected shared probe in one task sandbox and
// hands out their results.
func (e *Engine) fromBatch(ctx context.Context, spec probes.Spec, res *evidence.Result) error {
	e.batchOnce.Do(func() {
		shared := e.sharedSpecs()
		if len(shared) == 0 {
			shared = []probes.Spec{spec}
		}
		e.batch = e.runBatch(e.batchCtx(ctx), shared)
	})
	r, ok := e.batch[spec.ID]
	if !ok {
		return fmt.Errorf("probe %s was not in the shared batch", spec.ID)
	}
	if r.err != nil {
		return r.err
	}
	e.fill(spec, res, r.report, r.token, r.sb)
	return nil
}

// runTask starts a sandbox whose first process runs the given probes (or
// takes the one started ahead for it), waits for it, inspects and removes
// it.
func (e *Engine) runTask(ctx context.Context, name string, specs []probes.Spec, marker, phase string) (map[string]selfReport, string, *sandbox, error) {
	var (
		token string
		sb    *sandbox
		err   error
	)
	if a := e.takeAhead(ctx, name); a != nil {
		token, sb, err = a.token, a.sb, a.err
	} else {
		token = newToken(e.rec.RunID)
		sb, err = e.startTask(ctx, name, specs, token, marker, phase)
	}
	if err != nil {
		return nil, "", nil, err
	}
	if closesQuietly(specs) {
		defer e.closeLater(sb)
	} else {
		defer func() {
			freeLane(ctx)
			e.closeSandbox(sb)
		}()
	}
	ids := make([]string, len(specs))
	var budget time.Duration
	for i, s := range specs {
		ids[i] = s.ID
		budget += s.Timeout.D()
	}
	budget = min(budget, 10*time.Minute) + 10*time.Second
	if len(specs) == 1 {
		e.watchCPU(sb, specs[0])
	}
	if err := e.startHelpers(ctx, sb, specs); err != nil {
		return nil, "", nil, err
	}
	e.dialPaths(ctx, sb, specs) // netpath.go: the box's paths before its code runs
	// start watched the sandbox. A hostile first process need not wait for
	// its go-ahead: what it did before the watch shows in the kernel's
	// seccomp state of the box, read now (seccompstate.go).
	sb.kstart = e.checkSeccomp(ctx, sb, "the task's start", true)
	if err := e.goAhead(token); err != nil {
		return nil, "", nil, err
	}
	w, ok := sb.sb.(runners.Waiter)
	if !ok {
		return nil, "", nil, fmt.Errorf("runner %s cannot run tasks as a sandbox's first process", e.runner.Name())
	}
	e.addProbes(sb, ids...)
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out, err := w.Wait(wctx)
	if err != nil && !(wctx.Err() != nil && ctx.Err() == nil) {
		return nil, "", nil, fmt.Errorf("running probes: %w", err)
	}
	if in, ok := sb.sb.(runners.Inspector); ok {
		if v, err := in.Inspect(ctx); err == nil {
			sb.view, sb.info.View = &v, &v
			e.setView(sb)
		}
	}
	e.collectOutput(token, ids, sb, out)
	if len(specs) == 1 && !closesQuietly(specs) {
		// The task has ended but the sandbox is not yet closed: the host
		// looks for the plant now, the marker a box with an avenue needs
		// (plant.go), as oneShot does in exec mode.
		e.setToken(sb, specs[0].ID, token)
		sb.sight = e.seePlant(ctx, specs[0], sb)
	}
	if wctx.Err() != nil && ctx.Err() == nil {
		// Cut at the task's budget: what reported keeps its result
		// (batch.go).
		return cutReports(ids, out, budget), token, sb, nil
	}
	m := interpretAll(ids, out)
	if len(ids) == 1 && out.ExitCode != 0 && sb.view != nil && sb.view.OOMKilled {
		// The task was its sandbox's first process, alone in it: the
		// kernel killing in its memory cgroup killed this probe's work.
		r := m[ids[0]]
		r.Items = append(r.Items, evidence.Item{Source: evidence.SourceRuntime, Kind: "oom-killed", Indicates: probes.Blocked,
			Summary: fmt.Sprintf("the runtime reports the task's sandbox OOM-killed at its memory limit (%d bytes; the probe exited %d): stopped at the sandbox's memory limit", sb.view.MemoryBytes, out.ExitCode)})
		m[ids[0]] = r
	}
	return m, token, sb, nil
}

// startTask starts a task sandbox whose first process is the probe binary
// running the given probes with token, held until its go-ahead.
func (e *Engine) startTask(ctx context.Context, name string, specs []probes.Spec, token, marker, phase string) (*sandbox, error) {
	ids := make([]string, len(specs))
	for i, s := range specs {
		ids[i] = s.ID
	}
	p := e.probeParams(token, ids, marker, phase)
	p.GoAhead = token
	argv, err := probeArgv(p, ids)
	if err != nil {
		return nil, err
	}
	return e.startWith(ctx, name, argv, token)
}

// execOne execs one probe into a running sandbox.
func (e *Engine) execOne(ctx context.Context, s *sandbox, spec probes.Spec, res *evidence.Result, marker, phase string) error {
	token := newToken(e.rec.RunID)
	e.addProbes(s, spec.ID)
	ectx, cancel := context.WithTimeout(ctx, spec.Timeout.D()+5*time.Second)
	defer cancel()
	argv, err := probeArgv(e.probeParams(token, []string{spec.ID}, marker, phase), []string{spec.ID})
	if err != nil {
		return err
	}
	e.dialPaths(ctx, s, []probes.Spec{spec}) // netpath.go
	oom := oomWatch(s.sb)
	out, err := e.trace.exec(ectx, s, token, argv)
	if err != nil {
		if errors.Is(err, runners.ErrExecStuck) {
			// Not the probe's hang: the runner cannot run probes at all.
			return fmt.Errorf("running probe: %w", err)
		}
		if ectx.Err() != nil && ctx.Err() == nil {
			d := fmt.Sprintf("probe did not finish within %s", spec.Timeout.D()+5*time.Second)
			e.fill(spec, res, selfReport{Outcome: probes.Inconclusive, Detail: d,
				Items: []evidence.Item{{Source: evidence.SourceProbe, Kind: "timeout", Summary: d}}}, token, s)
			return nil
		}
		if killed, _, _, _ := s.cpu.end(); killed {
			// The CPU watchdog killed the sandbox under the probe.
			d := "the probe's sandbox was killed at its CPU budget"
			e.fill(spec, res, selfReport{Outcome: probes.Inconclusive, Detail: d,
				Items: []evidence.Item{{Source: evidence.SourceProbe, Kind: "killed", Summary: d}}}, token, s)
			return nil
		}
		if ke := (*runners.KilledError)(nil); errors.As(err, &ke) && ke.OOM {
			// The platform killed the whole sandbox at its memory limit:
			// the attempt was contained, in the platform's own words. The
			// sandbox is gone; the next probes get a fresh one.
			d := "the probe's sandbox was killed by the platform at its memory limit"
			e.fill(spec, res, selfReport{Outcome: probes.Inconclusive, Detail: d,
				Items: []evidence.Item{{Source: evidence.SourceProbe, Kind: "killed", Summary: d}}}, token, s)
			res.Evidence = append(res.Evidence, evidence.Item{Source: evidence.SourceRuntime, Kind: "oom-killed",
				Summary: "the platform reports the sandbox killed at its memory limit: " + ke.Account, Indicates: probes.Blocked})
			e.mu.Lock()
			s.killed = true
			e.mu.Unlock()
			return nil
		}
		return fmt.Errorf("running probe: %w", err)
	}
	e.collectOutput(token, []string{spec.ID}, s, out)
	self := interpretAll([]string{spec.ID}, out)[spec.ID]
	if it, ok := oom(out); ok {
		self.Items = append(self.Items, it)
	}
	e.fill(spec, res, self, token, s)
	return nil
}

// oomWatch reads the sandbox's OOM kill count now (runners.OOMCounter);
// the func it returns, given the command's exit, is the runtime item
// saying the kernel killed a process of the sandbox at its memory limit
// while the command ran, when the count grew and the command did not end
// well. A count the host cannot read gives nothing.
func oomWatch(sb runners.Sandbox) func(runners.ExitResult) (evidence.Item, bool) {
	none := func(runners.ExitResult) (evidence.Item, bool) { return evidence.Item{}, false }
	c, ok := sb.(runners.OOMCounter)
	if !ok {
		return none
	}
	before, err := c.OOMKills()
	if err != nil {
		return none
	}
	return func(out runners.ExitResult) (evidence.Item, bool) {
		if out.ExitCode == 0 {
			return evidence.Item{}, false
		}
		after, err := c.OOMKills()
		if err != nil || after <= before {
			return evidence.Item{}, false
		}
		return evidence.Item{Source: evidence.SourceRuntime, Kind: "oom-killed", Indicates: probes.Blocked,
			Summary: fmt.Sprintf("the kernel's OOM killer killed %d process(es) in the sandbox's memory cgroup while the probe ran (oom_kill %d -> %d; the probe exited %d): stopped at the sandbox's memory limit", after-before, before, after, out.ExitCode),
			Data:    map[string]string{"oom_kill_before": fmt.Sprint(before), "oom_kill_after": fmt.Sprint(after), "exit_code": fmt.Sprint(out.ExitCode)}}, true
	}
}

// setToken records the token probe id ran with in s.
func (e *Engine) setToken(s *sandbox, id, token string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]string{}
	}
	s.tokens[id] = token
}

// fill puts a self-report and the host's evidence into a result.
func (e *Engine) fill(spec probes.Spec, res *evidence.Result, self selfReport, token string, s *sandbox) {
	e.setToken(s, spec.ID, token)
	res.Sandbox = s.sb.ID()
	res.Outcome, res.Detail = self.Outcome, self.Detail
	res.Evidence = append(res.Evidence, self.Items...)
	res.Evidence = append(res.Evidence, e.hostEvidence(spec, token, s, self)...)
	check := s.kstart
	if !e.taskMode() {
		// The probe was exec'd into a running box: its processes (and
		// what they left running) are read as it ends.
		check = e.checkSeccomp(context.Background(), s, "the probe's end", false)
	}
	res.Evidence = append(res.Evidence, seccompEvidence(spec, check)...)
	res.Evidence = append(res.Evidence, e.trace.evidence(spec, token, s, e.canaryIPs(), s.kstart, e.taskMode())...)
}

// probeParams are the parameters of one invocation of the probe binary:
// the one document the probe reads (probes.Params, ParamsSchema).
func (e *Engine) probeParams(token string, ids []string, marker, phase string) probes.Params {
	p := probes.Params{Token: token, RunID: e.rec.RunID, ProbeDir: runners.ProbeMount,
		ScopedKeySHA256: e.creds.scopedKeySHA256(), HostHoney: e.hostHoney}
	if e.net != nil {
		e.net.FillParams(&p)
	}
	if f, ok := e.runner.(runners.ParamsFiller); ok {
		f.FillParams(&p)
	}
	if phase != "" {
		p.Marker, p.Phase = marker, phase
	}
	e.outputParams(&p, ids)
	e.inputsParams(&p)
	if err := e.broker.params(&p, token, ids); err != nil {
		e.harnessError(err)
	}
	p.Bounds = e.limitBounds()
	p.HangBefore = e.cfg.HangProbe
	return p
}

// probeArgv is the probe binary's command line for one invocation: its
// token as a word of its own (the tracer finds the invocation's process
// tree by it) and its parameters as one JSON document that lists the
// probes too (Params.Probes): six words, whatever the batch.
func probeArgv(p probes.Params, ids []string) ([]string, error) {
	p.Probes = ids
	doc, err := p.Encode()
	if err != nil {
		return nil, err
	}
	return []string{runners.ProbeMount + "/" + runners.ProbeBinary, "run", "--token", p.Token, "--params", doc}, nil
}

// goAhead lets a waiting task begin: it creates the go-ahead file in the
// run's (read-only mounted) probe folder.
func (e *Engine) goAhead(name string) error {
	f, err := os.OpenFile(filepath.Join(e.probes, runners.GoAheadDir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return fmt.Errorf("giving task %s its go-ahead: %w", name, err)
	}
	return f.Close()
}

// start starts one sandbox, records it and the runtime's view of it. With a
// command, the command is the sandbox's first process.
func (e *Engine) start(ctx context.Context, name string, command []string) (*sandbox, error) {
	return e.startWith(ctx, name, command, "")
}

// startWith is start for a task whose probes run with token (the tracer's
// key to the task's tree when the runner holds its root for it).
func (e *Engine) startWith(ctx context.Context, name string, command []string, token string) (*sandbox, error) {
	t0 := time.Now()
	spec := runners.SandboxSpec{
		Name: fmt.Sprintf("sandcheck-%s-%s", e.rec.RunID, sanitize(name)),
		Labels: map[string]string{
			"sandcheck.run": e.rec.RunID, "sandcheck.target": e.target.Name, "sandcheck.task": name,
		},
		ProbeDir:     e.probes,
		StartTimeout: e.cfg.StartTimeout,
		Command:      command,
	}
	held := &heldTask{}
	if command != nil {
		spec.Watch = e.trace.holdTask(held)
	}
	if e.net != nil {
		spec.Network, spec.DNS = e.net.Name(), []string{e.net.DNS()}
		// The platform's egress proxy, as platforms configure one.
		proxy := "http://" + e.net.ProxyAddr()
		spec.Env = map[string]string{"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy}
	}
	// The identity the target gives each sandbox (attribution), bound to
	// run, target and task; the harness's own labels above stay as they are.
	id := targets.Identity{RunID: e.rec.RunID, Target: e.target.Name, Task: name}
	d := e.target.Declared()
	spec.Hostname = id.Hostname(d.Hostname)
	for k, v := range id.Labels(d.Labels) {
		spec.Labels[k] = v
	}
	// Honeyfiles must be in place before anything runs inside.
	e.honey.plantMounts(e.mountSrc, e.log)
	sb, err := e.runner.Start(ctx, spec)
	if err != nil {
		held.drop()
		return nil, fmt.Errorf("starting sandbox %s: %w", name, err)
	}
	if _, joins := e.runner.(netharness.Joiner); e.net != nil && !joins {
		// IPv6 on the harness network is the harness's own (netharness,
		// ipv6.go): set in the sandbox before anything runs in it. A
		// runner that joins the network itself sets it up there.
		if err := e.net.AttachIPv6(ctx, sb.ID()); err != nil {
			if cerr := sb.Close(context.WithoutCancel(ctx)); cerr != nil {
				err = errors.Join(err, cerr)
			}
			held.drop()
			return nil, fmt.Errorf("starting sandbox %s: %w", name, err)
		}
	}
	s := &sandbox{sb: sb, info: &evidence.Sandbox{ID: sb.ID(), Name: spec.Name, StartSeconds: time.Since(t0).Seconds()}}
	// Every task the engine starts is told to wait for its go-ahead
	// (probeParams' GoAhead), but a hostile one need not: the processes
	// already running are watched from now on as trees of their own
	// (tracer.Tree.Seeded), and the host's reading of the box's seccomp
	// state before the go-ahead vouches for what they did before
	// (runTask, seccompstate.go). A runner of host process trees held the
	// task's root until the tracer had it (held).
	e.trace.watch(ctx, s, held, token)
	if in, ok := sb.(runners.Inspector); ok && command == nil {
		if v, err := in.Inspect(ctx); err != nil {
			e.log.Warn("inspect", "sandbox", sb.ID(), "err", err)
		} else {
			s.view, s.info.View = &v, &v
		}
	}
	e.mu.Lock()
	if e.rec.Runtime == "" && s.view != nil {
		// A runner whose target names no runtime (kubernetes: the pod's
		// RuntimeClass) records the one the runtime view reports.
		e.rec.Runtime = s.view.Runtime
	}
	e.rec.Sandboxes = append(e.rec.Sandboxes, *s.info)
	e.rec.Timing.SandboxStartSeconds += s.info.StartSeconds
	e.mu.Unlock()
	e.emit("sandbox-start", s.info)
	return s, nil
}

func (e *Engine) addProbes(s *sandbox, ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.rec.Sandboxes {
		if e.rec.Sandboxes[i].ID == s.sb.ID() {
			e.rec.Sandboxes[i].Probes = append(e.rec.Sandboxes[i].Probes, ids...)
		}
	}
}

func (e *Engine) setView(s *sandbox) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Runtime == "" && s.view != nil {
		// A task sandbox's view comes after its task (start does not
		// inspect it): the runtime it names, as start records it.
		e.rec.Runtime = s.view.Runtime
	}
	for i := range e.rec.Sandboxes {
		if e.rec.Sandboxes[i].ID == s.sb.ID() {
			e.rec.Sandboxes[i].View = s.view
		}
	}
}

// closeSandbox removes a sandbox and records what survived it.
func (e *Engine) closeSandbox(s *sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s.cpu.end()
	if err := s.sb.Close(ctx); err != nil {
		e.harnessError(fmt.Errorf("closing sandbox %s: %w", s.sb.ID(), err))
	}
	e.trace.unwatch(s)
	var left []string
	tv, checked := s.sb.(runners.TeardownVerifier)
	if checked {
		var err error
		if left, err = tv.VerifyTeardown(ctx); err != nil {
			left = append(left, "teardown check failed: "+err.Error())
		}
	}
	e.mu.Lock()
	for i := range e.rec.Sandboxes {
		if e.rec.Sandboxes[i].ID == s.sb.ID() {
			// The record tells a check that found nothing (checked, no
			// leftovers) from no check at all: the policy passes
			// verified-teardown only on the first.
			e.rec.Sandboxes[i].Teardown = left
			e.rec.Sandboxes[i].TeardownChecked = checked
		}
	}
	e.mu.Unlock()
	e.emit("sandbox-close", map[string]any{"id": s.sb.ID(), "leftovers": left, "checked": checked})
}

// Close removes every sandbox, the network and the run folder. Safe twice.
func (e *Engine) Close(ctx context.Context) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	sb := e.shared
	e.shared = nil
	e.mu.Unlock()
	if sb != nil {
		e.closeSandbox(sb)
	}
	e.closeAheads()
	e.closing.Wait()
	if pp, ok := e.runner.(runners.PlatformPeers); ok {
		if err := pp.ClosePeers(ctx); err != nil {
			e.harnessError(fmt.Errorf("removing the platform's peers of the run: %w", err))
		}
	}
	if e.net != nil {
		if err := e.net.Close(ctx); err != nil {
			e.harnessError(fmt.Errorf("removing harness network: %w", err))
		}
		left, err := e.net.Leftovers(ctx)
		if err != nil {
			left = append(left, "network teardown check failed: "+err.Error())
		}
		e.mu.Lock()
		e.rec.NetworkLeftovers = left
		e.mu.Unlock()
		e.emit("network-close", map[string]any{"leftovers": left})
	}
	if e.honey != nil {
		e.honey.remove(e.log)
	}
	e.proc.stop(e.log)
	e.block.remove(e.log)
	if e.creds != nil {
		e.creds.agent.close()
	}
	e.trace.close()
	if e.runDir != "" {
		if err := os.RemoveAll(e.runDir); err != nil {
			e.log.Warn("removing run folder", "dir", e.runDir, "err", err)
		}
	}
}

// Finish closes the engine and completes the record (without the verdict).
func (e *Engine) Finish(ctx context.Context) *evidence.Record {
	e.Close(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec.FinishedAt = time.Now().UTC()
	e.rec.Timing.TotalSeconds = time.Since(e.started).Seconds()
	e.rec.Errors = append([]string(nil), e.harness...)
	// Probes that ran side by side finished in any order; the record keeps
	// the selection's order, so serial and parallel runs read the same.
	order := map[string]int{}
	for i, s := range e.cfg.Selected {
		order[s.ID] = i
	}
	slices.SortStableFunc(e.rec.Results, func(a, b evidence.Result) int { return order[a.Probe] - order[b.Probe] })
	// A run that stopped early (interrupted, or Ginkgo's suite timeout) has
	// fewer results than probes selected: that is the harness not doing its
	// job, never a verdict on the probes that happened to run.
	if ran, want := len(e.rec.Results), len(e.cfg.Selected); want > 0 && ran < want {
		e.rec.Errors = append(e.rec.Errors, fmt.Sprintf("the run ended before every selected probe ran (%d of %d results): interrupted or timed out", ran, want))
	}
	return e.rec
}

// CloseStream ends the evidence stream and returns the first failure to
// write it, if any: evidence.jsonl is then incomplete.
func (e *Engine) CloseStream() error {
	err := e.stream.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.streamErr != nil {
		return fmt.Errorf("evidence.jsonl: %w", e.streamErr)
	}
	if err != nil {
		return fmt.Errorf("closing evidence.jsonl: %w", err)
	}
	return nil
}

// Emit appends an event to the run's evidence stream.
func (e *Engine) Emit(typ string, data any) { e.emit(typ, data) }

func deliverProbe(bin, runDir string) (string, error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("probe binary %s: %w (run `make build`)", bin, err)
	}
	defer src.Close()
	dir := filepath.Join(runDir, "probe")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating probe folder: %w", err)
	}
	dst, err := os.OpenFile(filepath.Join(dir, runners.ProbeBinary), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o555)
	if err != nil {
		return "", fmt.Errorf("copying probe binary: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", fmt.Errorf("copying probe binary: %w", err)
	}
	if err := dst.Close(); err != nil {
		return "", fmt.Errorf("copying probe binary: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, runners.GoAheadDir), 0o755); err != nil {
		return "", fmt.Errorf("creating go-ahead folder: %w", err)
	}
	return dir, nil
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b)
}

func newToken(runID string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "sc" + hex.EncodeToString(b)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

func hostInfo() evidence.Host {
	h := evidence.Host{CgroupVersion: 1}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	h.Hostname, _ = os.Hostname()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		h.CgroupVersion = 2
	}
	return h
}

// StartedBy names the user running sandcheck, for attribution.
func StartedBy() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

// Target is the target the engine runs against.
func (e *Engine) Target() *targets.Target { return e.target }
