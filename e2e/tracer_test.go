package e2e

import (
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// Without the kernel's view, a shared-kernel sandbox's blocked syscall probes
// rest on the box's word: hardened-runtime is unconfirmed and the run fails,
// however blocked the probes say they were. With the tracer on, the same
// probes pass, each confirmed by the kernel's count of its syscall.
func TestNoKernelViewIsUnconfirmed(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		state string
	}{
		{"tracer off", []string{"--trace=false"}, 1, evidence.TracerOff},
		{"tracer on", nil, 0, evidence.TracerOn},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--target", "fixtures/targets/hardened.yaml", "--label-filter", "syscalls", "--quiet"}, c.args...)
			r := sandcheck(t, args...)
			rec := r.mustRecord(t)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, c.code, r.stderr)
			}
			if rec.Tracer == nil || rec.Tracer.Status != c.state {
				t.Fatalf("tracer %+v, want status %s", rec.Tracer, c.state)
			}
			var hr *evidence.Criterion
			for i := range rec.Verdict.Criteria {
				if rec.Verdict.Criteria[i].ID == "hardened-runtime" {
					hr = &rec.Verdict.Criteria[i]
				}
			}
			if hr == nil {
				t.Fatal("no hardened-runtime criterion in the verdict")
			}
			blind := false
			for _, m := range hr.Reasons {
				blind = blind || strings.Contains(m, "the kernel's view is missing")
			}
			switch c.state {
			case evidence.TracerOff:
				if hr.Status != evidence.StatusUnconfirmed || !blind {
					t.Errorf("hardened-runtime %s %q, want unconfirmed for the missing kernel view", hr.Status, hr.Reasons)
				}
			default:
				if hr.Status != evidence.StatusPass || blind {
					t.Errorf("hardened-runtime %s %q, want pass with the kernel's view", hr.Status, hr.Reasons)
				}
			}
		})
	}
}

// The whole catalog on each runtime's hardened reference loses nothing in
// the tracer. Under gVisor the sentry drives its stubs with hundreds of
// thousands of ptrace calls a run (the ring buffer holds about 6,600
// events): before alike calls were counted in the kernel, every gVisor run
// lost 10k to 220k events and the tracer's status was partial.
func TestTracerLosesNothingAtCatalogLoad(t *testing.T) {
	for _, c := range []struct {
		target string
		// busiest is the syscall the runtime's host processes make most,
		// and at least how often: the load the test needs to mean anything.
		busiest string
		min     uint64
	}{
		{"hardened.yaml", "", 10000},
		{"hardened-gvisor.yaml", "ptrace", 100000},
	} {
		t.Run(c.target, func(t *testing.T) {
			r := sharedRun(t, c.target, false)
			rec := r.mustRecord(t)
			// The reference's verdict is the controls' business (a loaded
			// machine can push a gVisor limit probe over); the harness
			// itself must have done its job.
			if r.code == 2 {
				t.Fatalf("exit 2 (a harness error)\n%s", r.stderr)
			}
			for _, c := range rec.Verdict.Criteria {
				if c.Status != evidence.StatusPass {
					t.Logf("criterion %s %s: %q", c.ID, c.Status, c.Reasons)
				}
			}
			tr := rec.Tracer
			if tr == nil {
				t.Fatal("the record has no tracer section")
			}
			if tr.Status != evidence.TracerOn {
				t.Errorf("tracer status %s (%s), lost %v: want %s", tr.Status, tr.Reason, tr.Lost, evidence.TracerOn)
			}
			for kind, n := range tr.Lost {
				if n != 0 {
					t.Errorf("the tracer lost %d %s", n, kind)
				}
			}
			if len(tr.Lost) == 0 {
				t.Error("the record has no loss counters")
			}
			var load uint64
			for _, s := range tr.Sandboxes {
				for name, n := range s.Syscalls {
					if c.busiest == "" || name == c.busiest {
						load += n.Calls
					}
				}
			}
			if load < c.min {
				t.Errorf("the tracer counted %d %s calls in %d sandboxes, want at least %d: the load the test needs", load, c.busiest, len(tr.Sandboxes), c.min)
			}
			t.Logf("%d sandboxes, %d %s calls counted, lost %v", len(tr.Sandboxes), load, c.busiest, tr.Lost)
		})
	}
}
