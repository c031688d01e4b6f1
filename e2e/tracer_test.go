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
