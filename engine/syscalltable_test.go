package engine

import (
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

func TestSyscallTableFact(t *testing.T) {
	table := parseKallsyms(strings.NewReader("0000000000000000 T __x64_sys_io_uring_setup\n0000000000000000 t __x64_sys_bpf\n0000000000000000 D some_data\n"))
	if !table["io_uring_setup"] || !table["bpf"] || len(table) != 2 {
		t.Fatalf("parsed %v", table)
	}
	if parseKallsyms(strings.NewReader("0 D x\n")) != nil {
		t.Error("a listing without syscall entry points proves something")
	}
	na := selfReport{Outcome: probes.NotApplicable}
	spec := func(id string) probes.Spec { return probes.Spec{ID: id} }
	for _, tt := range []struct {
		id    string
		self  selfReport
		table map[string]bool
		apply bool
		ind   probes.Outcome
	}{
		{"syscalls.io-uring-setup", na, table, true, ""},                               // built in: the probe's claim contradicts the host
		{"syscalls.kexec-load", na, table, true, probes.NotApplicable},                 // absent: confirmed
		{"syscalls.not-a-syscall", na, table, true, ""},                                // no such syscall: nothing to confirm
		{"syscalls.kexec-load", na, nil, true, ""},                                     // table unreadable
		{"syscalls.kexec-load", selfReport{Outcome: probes.Blocked}, table, false, ""}, // only a not-applicable claim
		{"privilege.lsm", na, table, false, ""},
	} {
		it, ok := syscallTableFact(spec(tt.id), tt.self, tt.table)
		if ok != tt.apply || it.Indicates != tt.ind {
			t.Errorf("%s (%s, table %v): applies %v indicates %q, want %v %q (%s)", tt.id, tt.self.Outcome, tt.table != nil, ok, it.Indicates, tt.apply, tt.ind, it.Summary)
		}
	}
	if real := builtInSyscalls(); real != nil && !real["read"] {
		t.Errorf("this kernel's table lacks read: %d entries", len(real))
	}
}
