package engine

import (
	"net/netip"
	"strings"
	"testing"

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
	items := treeEvidence(probes.Spec{ID: "syscalls.setns"}, tree, &tracer.Report{}, []string{"10.1.1.1"})
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
