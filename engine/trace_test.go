package engine

import (
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/tracer"
)

// A probe's tree as the tracer reports it: alike calls folded into one
// event, and kinds past the tree's event budget counted without one.
func TestTreeEvidenceCountsAlikeCalls(t *testing.T) {
	tree := &tracer.Tree{Root: 7, Syscalls: map[string]tracer.Count{"setns": {Calls: 7, EPERM: 7}},
		Events: []tracer.Event{
			{Kind: tracer.KindSyscall, Syscall: "connect", Ret: -111, Errno: "ECONNREFUSED", Calls: 3,
				Addr: &tracer.SockAddr{Family: "inet", Addr: netip.MustParseAddr("10.9.8.7"), Port: 80}},
			{Kind: tracer.KindSyscall, Syscall: "setns", Ret: -1, Errno: "EPERM", Calls: 7},
		},
		Unitemized: map[string]uint64{"openat": 12}}
	items := treeEvidence(probes.Spec{ID: "syscalls.setns"}, tree, []*tracer.Tree{tree}, &tracer.Report{}, []string{"10.1.1.1"}, nil)
	byKind := map[string]string{}
	for _, it := range items {
		byKind[it.Kind] = it.Summary
		if it.Kind == "tracer-connect" && it.Data["calls"] != "3" {
			t.Errorf("tracer-connect data %v, want calls 3", it.Data)
		}
		if it.Kind == "tracer-syscall" && (it.Indicates != probes.Blocked || it.Data["eperm"] != "7") {
			t.Errorf("tracer-syscall %+v, want blocked with 7 EPERM", it)
		}
	}
	if !strings.Contains(byKind["tracer-connect"], "x3") {
		t.Errorf("tracer-connect %q does not say the call was made 3 times", byKind["tracer-connect"])
	}
	if !strings.Contains(byKind["tracer-events"], "setns = EPERM, x7") {
		t.Errorf("tracer-events %q does not count setns's 7 calls", byKind["tracer-events"])
	}
	if !strings.Contains(byKind["tracer-unitemized"], "openat x12") {
		t.Errorf("tracer-unitemized %q, want openat x12", byKind["tracer-unitemized"])
	}
}

// ioTree is a probe's tree that saw io_uring_setup refused twice, with the
// prctl calls the honest probe makes, all accounted for by their kinds.
func ioTree() *tracer.Tree {
	return &tracer.Tree{Root: 9, Syscalls: map[string]tracer.Count{
		"io_uring_setup": {Calls: 2, EPERM: 2}, "prctl": {Calls: 3, OK: 3}},
		Kinds: []tracer.CallKind{{Syscall: "prctl", Key: 4, Calls: 2, Itemized: true}, {Syscall: "prctl", Key: 1, Calls: 1, Itemized: true}}}
}

// kinds runs treeEvidence for syscalls.io-uring-setup and returns its
// items by kind.
func kinds(t *testing.T, tree *tracer.Tree, scope []*tracer.Tree, rep *tracer.Report, start *seccompCheck) map[string]evidence.Item {
	t.Helper()
	if scope == nil {
		scope = []*tracer.Tree{tree}
	}
	out := map[string]evidence.Item{}
	for _, it := range treeEvidence(probes.Spec{ID: "syscalls.io-uring-setup"}, tree, scope, rep, nil, start) {
		out[it.Kind] = it
	}
	return out
}

// Issue 40 item 1: any attempt at a filter of the box's own is tampering,
// whatever it returned and whether its event was itemized or only counted
// past the budget.
func TestSelfFilterAnyAttempt(t *testing.T) {
	for _, tt := range []struct {
		name string
		kind tracer.CallKind
		want string
	}{
		{"new listener (returns a descriptor)", tracer.CallKind{Syscall: "seccomp", Key: 1, Calls: 1, Itemized: true}, "seccomp(SECCOMP_SET_MODE_FILTER)"},
		{"unitemized, past the budget", tracer.CallKind{Syscall: "seccomp", Key: 1, Calls: 2}, "seccomp(SECCOMP_SET_MODE_FILTER) x2"},
		{"refused", tracer.CallKind{Syscall: "seccomp", Key: 1, Errno: "EFAULT", Calls: 1}, "seccomp(SECCOMP_SET_MODE_FILTER)"},
		{"strict", tracer.CallKind{Syscall: "seccomp", Key: 0, Calls: 1}, "seccomp(SECCOMP_SET_MODE_STRICT)"},
		{"via prctl", tracer.CallKind{Syscall: "prctl", Key: 22, Errno: "EINVAL", Calls: 1}, "prctl(PR_SET_SECCOMP)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree := ioTree()
			tree.Kinds = append(tree.Kinds, tt.kind)
			c := tree.Syscalls[tt.kind.Syscall]
			c.Calls += tt.kind.Calls
			tree.Syscalls[tt.kind.Syscall] = c
			it, ok := kinds(t, tree, nil, &tracer.Report{}, nil)["tracer-self-seccomp"]
			if !ok || it.Indicates != probes.Escaped || !strings.Contains(it.Summary, tt.want) || !strings.Contains(it.Summary, "tampering") {
				t.Errorf("self-filter item %+v (found %v), want escaped tampering naming %s", it, ok, tt.want)
			}
		})
	}
	// A filter streamed as an event of its own (the kernel's table of
	// kinds was full) counts too.
	tree := ioTree()
	tree.Events = append(tree.Events, tracer.Event{Kind: tracer.KindSyscall, Syscall: "seccomp", Ret: 3, Args: [6]uint64{1, 8}})
	tree.Syscalls["seccomp"] = tracer.Count{Calls: 1, OK: 1}
	if _, ok := kinds(t, tree, nil, &tracer.Report{}, nil)["tracer-self-seccomp"]; !ok {
		t.Error("a seccomp filter streamed without a kind was not seen")
	}
	// In task mode every tree of the box counts.
	other := &tracer.Tree{Root: 10, Syscalls: map[string]tracer.Count{"seccomp": {Calls: 1, OK: 1}},
		Kinds: []tracer.CallKind{{Syscall: "seccomp", Key: 1, Calls: 1}}}
	tree = ioTree()
	if _, ok := kinds(t, tree, []*tracer.Tree{tree, other}, &tracer.Report{}, nil)["tracer-self-seccomp"]; !ok {
		t.Error("a filter another tree of the task's box asked for was not seen")
	}
	if _, ok := kinds(t, tree, nil, &tracer.Report{}, nil)["tracer-self-seccomp"]; ok {
		t.Error("the honest tree (prctl PR_SET_DUMPABLE and PR_SET_PDEATHSIG only) reads as filtering itself")
	}
}

// Issue 40 item 1: a tree whose watch began late with nothing to vouch for
// its earlier doings, or that lost events, spent its budget, or made
// seccomp or prctl calls the kernel's kinds do not account for, leaves its
// refusals unconfirmed; the honest tree stays confirmed.
func TestWatchDoubtsLeaveRefusalsUnconfirmed(t *testing.T) {
	clean := &seccompCheck{when: "the task's start", ran: true, expected: 1, tasks: 2}
	for _, tt := range []struct {
		name      string
		mod       func(*tracer.Tree, *tracer.Report)
		start     *seccompCheck
		confirmed bool
		why       string
	}{
		{"honest", func(*tracer.Tree, *tracer.Report) {}, nil, true, ""},
		{"seeded, vouched for", func(tr *tracer.Tree, _ *tracer.Report) { tr.Seeded = true }, clean, true, ""},
		{"seeded, no reading", func(tr *tracer.Tree, _ *tracer.Report) { tr.Seeded = true }, nil, false, "ran before the tracer watched it"},
		{"seeded, reading could not run", func(tr *tracer.Tree, _ *tracer.Report) { tr.Seeded = true },
			&seccompCheck{when: "the task's start", reason: "no pid"}, false, "could not read the box's seccomp state"},
		{"seeded, filters over", func(tr *tracer.Tree, _ *tracer.Report) { tr.Seeded = true },
			&seccompCheck{when: "the task's start", ran: true, expected: 1, over: []string{"pid 5: Seccomp 2, 2 filter(s)"}}, false, "more seccomp filters than the runtime's 1"},
		{"seeded, a thread unwatched", func(tr *tracer.Tree, _ *tracer.Report) { tr.Seeded = true },
			&seccompCheck{when: "the task's start", ran: true, expected: 1, unwatched: []string{"pid 6"}}, false, "outside the tracer's watch"},
		{"lost events", func(_ *tracer.Tree, r *tracer.Report) { r.Lost.Events = 4 }, nil, false, "lost 4 event(s)"},
		{"capped", func(tr *tracer.Tree, _ *tracer.Report) { tr.Capped = 9 }, nil, false, "past the watch's cap"},
		{"over budget", func(tr *tracer.Tree, _ *tracer.Report) { tr.OverBudget = true }, nil, false, "budget"},
		{"unaccounted prctl", func(tr *tracer.Tree, _ *tracer.Report) { tr.Syscalls["prctl"] = tracer.Count{Calls: 5, OK: 5} }, nil, false, "2 of the probe's 5 prctl call(s)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree, rep := ioTree(), &tracer.Report{}
			tt.mod(tree, rep)
			got := kinds(t, tree, nil, rep, tt.start)
			it, confirmed := got["tracer-syscall"]
			un, unconfirmed := got["tracer-syscall-unconfirmed"]
			if confirmed != tt.confirmed || unconfirmed == tt.confirmed {
				t.Fatalf("items %v; want confirmed %v", got, tt.confirmed)
			}
			if confirmed && it.Indicates != probes.Blocked {
				t.Errorf("confirmed item %+v, want blocked", it)
			}
			if unconfirmed && (un.Indicates != "" || !strings.Contains(un.Summary, tt.why) || un.Data["eperm"] != "2") {
				t.Errorf("unconfirmed item %+v, want no indication, the counts and %q", un, tt.why)
			}
		})
	}
}

// A probe's tree is the one whose root exec'd with its token, never a held
// command's tree (a wrapper's processes, whose command line names the
// token too, and whose setup makes the calls the probes try).
func TestProbeTreeNeverHeld(t *testing.T) {
	const tok = "tok-1"
	held := &tracer.Tree{Root: 1<<31 | 40, Held: true, Argv: []string{"/bin/sh", "-c", "x", "sh", "bwrap", "--", "/p/sandcheck-probe", "run", "--token", tok},
		Syscalls: map[string]tracer.Count{"setns": {Calls: 1, OK: 1}}}
	rep := &tracer.Report{Scope: tracer.ScopeTree, Trees: map[uint32]*tracer.Tree{held.Root: held}}
	if got := probeTree(rep, tok); got != nil {
		t.Fatalf("the held tree %d was taken for the probe's", got.Root)
	}
	own := &tracer.Tree{Root: 42, Argv: []string{"/p/sandcheck-probe", "run", "--token", tok}, Syscalls: map[string]tracer.Count{"setns": {Calls: 1, OtherErr: 1}}}
	rep.Trees[own.Root] = own
	if got := probeTree(rep, tok); got != own {
		t.Fatalf("probe tree %+v, want the probe binary's own (root 42)", got)
	}
}

// A sandbox the tracer did not watch reads "not watched" with why in each
// probe's evidence, and in the record, with no counts.
func TestUnwatchedSandboxSaysWhy(t *testing.T) {
	rt := openTrace(slog.New(slog.DiscardHandler), &evidence.Record{}, false)
	rt.t = &tracer.Tracer{} // loaded, as far as this path goes
	sb := &sandbox{sb: &meteredBox{}}
	rt.unwatched("box", errors.New("its runner names no host process of it"))
	items := rt.evidence(probes.Spec{ID: "syscalls.acct"}, "tok", sb, nil, nil, false)
	if len(items) != 1 || items[0].Kind != "tracer-unwatched" || items[0].Summary != "tracer: the sandbox was not watched: its runner names no host process of it" {
		t.Errorf("evidence %+v, want one tracer-unwatched item with the reason", items)
	}
	rt.unwatch(sb)
	if got := rt.rec.Sandboxes; len(got) != 1 || got[0].Unwatched == "" || len(got[0].Syscalls) != 0 || got[0].Scope != "" {
		t.Errorf("record %+v, want the sandbox listed as not watched, with why and no counts", got)
	}
	if rt.rec.Status != evidence.TracerPartial {
		t.Errorf("status %s, want partial while a sandbox is unwatched", rt.rec.Status)
	}
}
