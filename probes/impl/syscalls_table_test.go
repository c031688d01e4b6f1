package impl

import (
	"context"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestMoreSyscallsTable checks that every table entry has a catalog entry of
// the expected shape, a registry line, and a reason why it is harmless.
func TestMoreSyscallsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range moreSyscalls {
		if seen[s.name] {
			t.Errorf("%s is in the table twice", s.name)
		}
		seen[s.name] = true
		id := "syscalls." + strings.ReplaceAll(s.name, "_", "-")
		spec, ok := probes.Lookup(id)
		if !ok {
			t.Errorf("%s: no catalog entry %s", s.name, id)
			continue
		}
		if _, ok := registry[id]; !ok {
			t.Errorf("%s: no registry line", id)
		}
		if spec.Criterion != "hardened-runtime" || spec.Sandbox != probes.Shared || spec.Expected("default") != probes.Blocked {
			t.Errorf("%s: criterion %s, sandbox %s, expect %v", id, spec.Criterion, spec.Sandbox, spec.Expect)
		}
		if len(s.harmless) < 20 {
			t.Errorf("%s: say why the arguments are harmless", s.name)
		}
	}
}

// TestMoreSyscallsNeverSucceed runs every entry here, wherever the tests run
// (as root without seccomp the calls reach the kernel): an allowed call must
// fail with the errno its harmless arguments provoke, never succeed, except
// syslog's read of the buffer size.
func TestMoreSyscallsNeverSucceed(t *testing.T) {
	p := probes.Params{Token: "unit-test"}
	for _, s := range moreSyscalls {
		r := moreSyscallProbe(s.name)(context.Background(), p)
		if r.Outcome != probes.Blocked && r.Outcome != probes.Escaped {
			t.Errorf("%s: outcome %s: %s", s.name, r.Outcome, r.Detail)
		}
		if strings.HasPrefix(r.Evidence["result"], "success") && s.name != "syslog" {
			t.Errorf("%s succeeded: its arguments are not harmless (%v)", s.name, r.Evidence)
		}
		if r.Evidence["harmless"] == "" {
			t.Errorf("%s: no harmless note in the evidence", s.name)
		}
		t.Logf("%s: %s %s%s", s.name, r.Outcome, r.Evidence["errno"], r.Evidence["result"])
	}
}

func TestMoreSyscallProbeUnknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a name outside the table")
		}
	}()
	moreSyscallProbe("no_such_syscall")
}

func TestControllingTTY(t *testing.T) {
	if nr, ok := controllingTTY(); !ok || nr == "" {
		t.Errorf("controllingTTY() = %q, %v", nr, ok)
	}
}
