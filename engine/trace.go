package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/tracer"
)

// runTrace is the run's use of the tracer. Per-probe attribution is by
// process tree: each probe is one `docker exec` whose process enters the
// sandbox with the probe's one-time token in its argv, and the tracer keeps
// that process and its children as one tree. A sandbox whose commands are
// host process trees of their own (runners.TreeExecer: a wrapper's
// invocations) is watched by each command's root, which the runner holds
// until the tracer has it (roots, by token); the probe binary's exec below
// it starts the probe's own tree, found by its token as in a namespace, so
// the wrapper's own setup (its mounts, namespaces and seccomp filters) is
// never taken for the probe's doings. gVisor's workload never shows up as host processes, so under
// runsc only the sandbox's host surface (the sentry's syscalls) is
// reported, not per-probe counts.
type runTrace struct {
	log     *slog.Logger
	t       *tracer.Tracer
	rec     *evidence.Tracer
	mu      sync.Mutex
	watches map[string]*tracer.Watch // by sandbox ID
	// closed keeps the final report of each closed watch, by sandbox ID: a
	// task sandbox is gone before its probes' results are filled in.
	closed  map[string]*tracer.Report
	surface map[string]bool
	// why says, by sandbox ID, why a sandbox was not watched.
	why map[string]string
	// trees marks, by sandbox ID, the watches of held command trees: a
	// probe's tree there is only ever its held root's.
	trees map[string]bool
	// roots are, by token, the held roots of probe invocations, and
	// rootErr why one could not join its sandbox's watch.
	roots   map[string]uint32
	rootErr map[string]string
	// probeBin is the run's probe binary on the host, whose exec starts a
	// tree of its own in a watch of command trees.
	probeBin string
}

// openTrace loads the tracer unless the run's Config turned it off
// (Config.NoTrace); a tracer that cannot load leaves the run untraced, saying
// why.
func openTrace(log *slog.Logger, rec *evidence.Record, on bool) *runTrace {
	rt := &runTrace{log: log, watches: map[string]*tracer.Watch{}, closed: map[string]*tracer.Report{}, surface: map[string]bool{},
		why: map[string]string{}, trees: map[string]bool{}, roots: map[string]uint32{}, rootErr: map[string]string{},
		rec: &evidence.Tracer{Status: evidence.TracerOn, Runtime: rec.Runtime, HostSyscalls: []string{}}}
	rec.Tracer = rt.rec
	if !on {
		rt.rec.Status, rt.rec.Reason = evidence.TracerOff, "turned off (--trace=false)"
		return rt
	}
	t, err := tracer.New(tracer.Options{Logger: log})
	if err != nil {
		rt.rec.Status, rt.rec.Reason = evidence.TracerUnavailable, err.Error()
		log.Warn("tracer: unavailable", "reason", err)
		return rt
	}
	rt.t = t
	return rt
}

// heldTask is the watch a task's start made of the task's held root
// (SandboxSpec.Watch), until watch gives it to the sandbox.
type heldTask struct {
	w    *tracer.Watch
	pid  int
	root uint32 // the held tree's key
	err  error
}

// holdTask is the SandboxSpec.Watch of a task's start, filling h; nil
// without a tracer.
func (rt *runTrace) holdTask(h *heldTask) func(pid int) {
	if rt == nil || rt.t == nil {
		return nil
	}
	return func(pid int) {
		w, err := rt.t.WatchTrees(tracer.WatchOptions{RootExec: rt.probeBin})
		var root uint32
		if err == nil {
			if root, err = w.AddTree(pid); err != nil {
				_, cerr := w.Close()
				err, w = errors.Join(err, cerr), nil
			}
		}
		h.w, h.pid, h.root, h.err = w, pid, root, err
	}
}

// drop closes the watch of a task whose sandbox never started.
func (h *heldTask) drop() {
	if h != nil && h.w != nil {
		h.w.Close()
		h.w = nil
	}
}

// watch starts watching a sandbox: a task's held root (held, whose probes
// ran with token), else by its init's pid or mount namespace (or, for
// gVisor's sentry, its process tree), else, for a sandbox of host process
// trees, each command as it starts (exec). What cannot be watched is
// recorded with why.
func (rt *runTrace) watch(ctx context.Context, s *sandbox, held *heldTask, token string) {
	if rt == nil || rt.t == nil {
		held.drop()
		return
	}
	id := s.sb.ID()
	if held != nil && (held.w != nil || held.err != nil) {
		if held.err != nil {
			rt.unwatched(id, fmt.Errorf("watching the task's held root (pid %d): %w", held.pid, held.err))
			return
		}
		rt.mu.Lock()
		rt.watches[id], rt.trees[id], rt.roots[token] = held.w, true, held.root
		rt.mu.Unlock()
		return
	}
	_, execTrees := s.sb.(runners.TreeExecer)
	if _, named := s.sb.(runners.HostPIDer); execTrees && !named {
		w, err := rt.t.WatchTrees(tracer.WatchOptions{RootExec: rt.probeBin})
		if err != nil {
			rt.unwatched(id, err)
			return
		}
		rt.mu.Lock()
		rt.watches[id], rt.trees[id] = w, true
		rt.mu.Unlock()
		return
	}
	pid, err := initPID(ctx, s.sb)
	if err == nil {
		var w *tracer.Watch
		if w, err = rt.t.Watch(pid, tracer.WatchOptions{Tree: true}); err == nil {
			rt.mu.Lock()
			rt.watches[id] = w
			rt.mu.Unlock()
			return
		}
	}
	rt.unwatched(id, err)
}

// unwatched records that sandbox id is not watched, and why.
func (rt *runTrace) unwatched(id string, err error) {
	rt.log.Warn("tracer: cannot watch sandbox", "sandbox", id, "err", err)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.why[id] = err.Error()
	rt.rec.Status, rt.rec.Reason = evidence.TracerPartial, fmt.Sprintf("sandbox %s unwatched: %v", id, err)
}

// exec runs one probe invocation (token) in a sandbox: for a sandbox of
// host process trees with a watch, its root joins the watch, held, before
// it runs anything.
func (rt *runTrace) exec(ctx context.Context, s *sandbox, token string, argv []string) (runners.ExitResult, error) {
	te, ok := s.sb.(runners.TreeExecer)
	w := rt.watchOf(s)
	if !ok || w == nil {
		return s.sb.Exec(ctx, argv)
	}
	return te.ExecTree(ctx, argv, func(pid int) {
		root, err := w.AddTree(pid)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if err != nil {
			rt.rootErr[token] = err.Error()
			rt.log.Warn("tracer: cannot watch a probe's command", "sandbox", s.sb.ID(), "pid", pid, "err", err)
			return
		}
		rt.roots[token] = root
	})
}

// initPID is the sandbox init's host pid, as its runner names it.
func initPID(ctx context.Context, sb runners.Sandbox) (int, error) {
	hp, ok := sb.(runners.HostPIDer)
	if !ok {
		return 0, errors.New("its runner names no host process of it (a platform's sandbox elsewhere)")
	}
	return hp.HostPID(ctx)
}

// unwatch ends a sandbox's watch and adds its counts to the record.
func (rt *runTrace) unwatch(s *sandbox) {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	w := rt.watches[s.sb.ID()]
	delete(rt.watches, s.sb.ID())
	rt.mu.Unlock()
	if w == nil {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if why, ok := rt.why[s.sb.ID()]; ok {
			rt.rec.Sandboxes = append(rt.rec.Sandboxes, evidence.TracedSandbox{ID: s.sb.ID(), Unwatched: why, Syscalls: map[string]evidence.SyscallCount{}})
		}
		return
	}
	rep, err := w.Close()
	if err != nil || rep == nil {
		rt.log.Warn("tracer: closing a watch", "sandbox", s.sb.ID(), "err", err)
		return
	}
	ts := evidence.TracedSandbox{ID: s.sb.ID(), Scope: rep.Scope, Partial: rep.Partial, Syscalls: map[string]evidence.SyscallCount{}}
	for name, c := range rep.Syscalls() {
		ts.Syscalls[name] = evidence.SyscallCount(c)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.closed[s.sb.ID()] = rep
	rt.rec.Sandboxes = append(rt.rec.Sandboxes, ts)
	for name := range ts.Syscalls {
		rt.surface[name] = true
	}
	rt.rec.HostSyscalls = slices.Sorted(maps.Keys(rt.surface))
}

// close unloads the tracer and records what it lost.
func (rt *runTrace) close() {
	if rt == nil || rt.t == nil {
		return
	}
	if l, err := rt.t.Lost(); err == nil {
		rt.rec.Lost = map[string]uint64{"events": l.Events, "tasks": l.Tasks, "counts": l.Counts, "capped": l.Capped}
		if l.Any() && rt.rec.Status == evidence.TracerOn {
			rt.rec.Status, rt.rec.Reason = evidence.TracerPartial, "the tracer lost events (see lost)"
		}
	}
	if err := rt.t.Close(); err != nil {
		rt.log.Warn("tracer: unloading", "err", err)
	}
	rt.t = nil
}

// tracedProbe says whether the tracer has something to say about a probe.
func tracedProbe(spec probes.Spec) bool {
	return strings.HasPrefix(spec.ID, "syscalls.") || strings.HasPrefix(spec.ID, "egress.") ||
		strings.HasPrefix(spec.ID, "privilege.") || strings.HasPrefix(spec.ID, "host.")
}

// watchOf is the sandbox's open watch, or nil.
func (rt *runTrace) watchOf(s *sandbox) *tracer.Watch {
	if rt == nil {
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.watches[s.sb.ID()]
}

// evidence joins what the kernel saw of one probe's process tree. In task
// mode (task) the sandbox is the task's alone, so a seccomp filter any of
// its trees asked for is the task's; start is the host's reading of the
// box's seccomp state at the task's start (seccompstate.go), which vouches
// for what a tree that ran before the watch did before it.
func (rt *runTrace) evidence(spec probes.Spec, token string, s *sandbox, canaries []string, start *seccompCheck, task bool) []evidence.Item {
	if rt == nil || !tracedProbe(spec) {
		return nil
	}
	item := func(kind, summary string, ind probes.Outcome) evidence.Item {
		return evidence.Item{Source: evidence.SourceTracer, Kind: kind, Summary: summary, Indicates: ind}
	}
	if rt.t == nil {
		return []evidence.Item{item("tracer-unavailable", fmt.Sprintf("tracer: %s (%s)", rt.rec.Status, rt.rec.Reason), "")}
	}
	rt.mu.Lock()
	w, rep, why := rt.watches[s.sb.ID()], rt.closed[s.sb.ID()], rt.why[s.sb.ID()]
	root, held := rt.roots[token]
	trees, rootErr := rt.trees[s.sb.ID()], rt.rootErr[token]
	rt.mu.Unlock()
	if w == nil && rep == nil {
		if why == "" {
			why = "no watch was made"
		}
		return []evidence.Item{item("tracer-unwatched", "tracer: the sandbox was not watched: "+why, "")}
	}
	if w != nil {
		var err error
		if rep, err = w.Report(); err != nil {
			return []evidence.Item{item("tracer-error", "tracer: "+err.Error(), "")}
		}
	}
	tree := probeTree(rep, token)
	if tree == nil {
		var msg string
		switch {
		case rootErr != "":
			msg = "tracer: the probe's command could not join the sandbox's watch: " + rootErr
		case held:
			var n uint64
			if h := rep.Trees[root]; h != nil {
				for _, c := range h.Syscalls {
					n += c.Calls
				}
			}
			msg = fmt.Sprintf("tracer: the probe's command was watched (its wrapper's processes made %d syscalls), but no exec of the probe binary was seen below it", n)
		case trees:
			msg = "tracer: the probe's command was not held for the tracer"
		default:
			msg = "tracer: no process of this probe entered the sandbox as a host process"
			if rt.rec.Runtime == "runsc" {
				msg += " (gVisor: the host sees the sentry, not the probe; see the run's host surface)"
			}
		}
		return []evidence.Item{item("tracer-no-process", msg, "")}
	}
	scope := []*tracer.Tree{tree}
	if task {
		// The task's sandbox is its own: every probe tree in it is the
		// task's (never a held wrapper tree, whose setup installs filters
		// of its own).
		scope = nil
		for _, r := range slices.Sorted(maps.Keys(rep.Trees)) {
			if !rep.Trees[r].Held {
				scope = append(scope, rep.Trees[r])
			}
		}
	}
	return treeEvidence(spec, tree, scope, rep, canaries, start)
}

// probeTree is the tree whose root was exec'd with the probe's token among
// its arguments; never a held command's tree (a wrapper's processes, whose
// command line names the token too: tracer.Report.TreeWithArg).
func probeTree(rep *tracer.Report, token string) *tracer.Tree {
	return rep.TreeWithArg(token)
}

// treeEvidence turns a probe's process tree into evidence items; scope is
// the trees whose seccomp filters count as the probe's (its own, or every
// tree of a task's sandbox).
func treeEvidence(spec probes.Spec, tree *tracer.Tree, scope []*tracer.Tree, rep *tracer.Report, canaries []string, start *seccompCheck) []evidence.Item {
	var items []evidence.Item
	var total, denied uint64
	for _, c := range tree.Syscalls {
		total, denied = total+c.Calls, denied+c.Denied()
	}
	sum := evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-syscalls",
		Summary: fmt.Sprintf("the kernel saw %d syscalls (%d distinct) from the probe's processes, %d refused (EPERM/EACCES/ENOSYS)", total, len(tree.Syscalls), denied)}
	if rep.Partial {
		sum.Summary += "; partial: the probe ran before the tracer watched it"
	}
	if rep.Lost.Any() {
		sum.Summary += fmt.Sprintf("; incomplete: lost %+v", rep.Lost)
	}
	items = append(items, sum)
	doubts := watchDoubts(tree, rep, start)
	if name, ok := strings.CutPrefix(spec.ID, "syscalls."); ok {
		name = strings.ReplaceAll(name, "-", "_")
		c := tree.Syscalls[name]
		it := evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-syscall",
			Data: map[string]string{"syscall": name, "calls": fmt.Sprint(c.Calls), "ok": fmt.Sprint(c.OK),
				"eperm": fmt.Sprint(c.EPERM), "eacces": fmt.Sprint(c.EACCES), "enosys": fmt.Sprint(c.ENOSYS), "other_errors": fmt.Sprint(c.OtherErr)}}
		switch {
		case c.Calls == 0:
			it.Summary = fmt.Sprintf("the kernel saw no %s call from the probe", name)
		case c.Reached() > 0 && c.Denied() > 0:
			// An argument-dependent filter (Docker's allows personality
			// queries, for one): the tracer cannot tell which call the
			// probe's verdict is about, so it only informs.
			it.Summary = fmt.Sprintf("the kernel refused %s %d time(s) and let it reach its code %d time(s) (argument-dependent filtering)", name, c.Denied(), c.Reached())
		case c.Reached() > 0:
			it.Summary = fmt.Sprintf("the kernel saw %s reach its code %d time(s) and refuse it never (%d succeeded, %d failed past the permission check)", name, c.Reached(), c.OK, c.OtherErr)
			it.Indicates = probes.Escaped
		default:
			it.Summary = fmt.Sprintf("the kernel refused %s %d time(s) (EPERM %d, EACCES %d, ENOSYS %d)", name, c.Denied(), c.EPERM, c.EACCES, c.ENOSYS)
			it.Indicates = probes.Blocked
		}
		if len(doubts) > 0 && it.Indicates != probes.Escaped {
			// Whose filter refused it is not established: the count stays
			// in the record, the claim unconfirmed (kernelview.rego).
			it.Kind, it.Indicates = "tracer-syscall-unconfirmed", ""
			it.Summary += "; unconfirmed: " + strings.Join(doubts, "; ")
		}
		items = append(items, it)
	}
	if it, ok := selfFilter(scope); ok {
		items = append(items, it)
	}
	var notable []string
	for _, ev := range tree.Events {
		if ev.Kind != tracer.KindSyscall {
			continue
		}
		if ev.Addr != nil && ev.Addr.Addr.IsValid() && !slices.Contains(canaries, ev.Addr.Addr.String()) && !ev.Addr.Addr.IsLoopback() {
			items = append(items, evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-connect",
				Summary: fmt.Sprintf("the kernel saw %s to %s, a non-canary address (result %s%s)", ev.Syscall, ev.Addr, result(ev), times(ev)),
				Data: map[string]string{"syscall": ev.Syscall, "family": ev.Addr.Family, "address": ev.Addr.String(), "result": result(ev),
					"calls": fmt.Sprint(max(ev.Calls, 1))}})
			continue
		}
		if len(notable) < 10 && ev.Addr == nil {
			call := ev.Syscall
			if ev.Path != "" {
				call += " " + ev.Path
			}
			notable = append(notable, fmt.Sprintf("%s = %s%s", call, result(ev), times(ev)))
		}
	}
	if len(notable) > 0 {
		items = append(items, evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-events",
			Summary: "privileged calls and sensitive opens: " + strings.Join(notable, "; ")})
	}
	if len(tree.Unitemized) > 0 {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(tree.Unitemized)) {
			parts = append(parts, fmt.Sprintf("%s x%d", name, tree.Unitemized[name]))
		}
		items = append(items, evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-unitemized",
			Summary: "privileged calls, sensitive opens and sends the kernel counted past the probe's event budget, without their arguments: " + strings.Join(parts, ", ")})
	}
	return items
}

// times renders how many alike calls an event stands for, when more than one.
func times(ev tracer.Event) string {
	if ev.Calls > 1 {
		return fmt.Sprintf(", x%d", ev.Calls)
	}
	return ""
}

func result(ev tracer.Event) string {
	if ev.Errno != "" {
		return ev.Errno
	}
	return fmt.Sprint(ev.Ret)
}

// canaryIPs are the harness's own addresses: connections there are expected.
func (e *Engine) canaryIPs() []string {
	if e.net == nil {
		return nil
	}
	var out []string
	for _, a := range e.net.Owned() {
		out = append(out, a.String())
	}
	return out
}

// Arguments that install a seccomp filter: seccomp(SECCOMP_SET_MODE_STRICT
// or SECCOMP_SET_MODE_FILTER) and prctl(PR_SET_SECCOMP).
const (
	seccompSetModeStrict = 0
	seccompSetModeFilter = 1
	prSetSeccomp         = 22
)

// selfFilter is the host's evidence that the probe's own processes asked
// the kernel for a seccomp filter, which the honest probe never does: the
// sandbox's filter is installed by the runtime before the probe starts, so
// a filter the box sets on itself makes every refusal after it the box's
// own, and the probe's "blocked" a forgery. Any attempt counts, whatever
// it returned (a NEW_LISTENER filter returns a descriptor, a refused one an
// error) and whether or not its event was itemized: the kernel counts each
// kind of call with its first argument past the event budget. It
// indicates escaped (the probe's claim is tampered with, and the host
// outranks it).
func selfFilter(trees []*tracer.Tree) (evidence.Item, bool) {
	var calls []string
	var total uint64
	for _, tree := range trees {
		sc, _ := tree.FirstArgCalls("seccomp")
		pr, _ := tree.FirstArgCalls("prctl")
		for _, c := range []struct {
			n    uint64
			name string
		}{
			{sc[seccompSetModeFilter], "seccomp(SECCOMP_SET_MODE_FILTER)"},
			{sc[seccompSetModeStrict], "seccomp(SECCOMP_SET_MODE_STRICT)"},
			{pr[prSetSeccomp], "prctl(PR_SET_SECCOMP)"},
		} {
			if c.n == 0 {
				continue
			}
			total += c.n
			if c.n > 1 {
				calls = append(calls, fmt.Sprintf("%s x%d", c.name, c.n))
			} else {
				calls = append(calls, c.name)
			}
		}
	}
	if len(calls) == 0 {
		return evidence.Item{}, false
	}
	slices.Sort(calls)
	calls = slices.Compact(calls)
	return evidence.Item{Source: evidence.SourceTracer, Kind: "tracer-self-seccomp", Indicates: probes.Escaped,
		Data: map[string]string{"attempts": fmt.Sprint(total)},
		Summary: "tampering: the probe's own processes installed a seccomp filter (" + strings.Join(calls, ", ") +
			", whatever the calls returned): refusals after it are the box's own, not the sandbox's; the probe's result is tampered with"}, true
}

// watchDoubts lists what keeps the tracer from establishing that the
// refusals it counted for tree were the sandbox's: a tree that ran before
// the watch began with no clean host reading of the box's seccomp state
// at the task's start to vouch for that time, events lost or dropped, a
// spent event budget, and seccomp or prctl calls whose first argument the
// kernel's counts do not account for. Each leaves the tree's syscall
// claims unconfirmed, never confirmed.
func watchDoubts(tree *tracer.Tree, rep *tracer.Report, start *seccompCheck) []string {
	var out []string
	if tree.Seeded && !start.clean() {
		out = append(out, "the probe's process ran before the tracer watched it, and "+start.why())
	}
	if l := rep.Lost; l.Events+l.Tasks+l.Counts > 0 {
		out = append(out, fmt.Sprintf("the tracer lost %d event(s), %d process(es) and %d count(s) while watching", l.Events, l.Tasks, l.Counts))
	}
	if tree.Capped > 0 {
		out = append(out, fmt.Sprintf("%d of the probe's events were past the watch's cap", tree.Capped))
	}
	if tree.OverBudget {
		out = append(out, "the probe's processes spent their budget of itemized events")
	}
	for _, name := range []string{"seccomp", "prctl"} {
		_, known := tree.FirstArgCalls(name)
		if n := tree.Syscalls[name].Calls; n > known {
			out = append(out, fmt.Sprintf("%d of the probe's %d %s call(s) were counted without their arguments", n-known, n, name))
		}
	}
	return out
}
