package e2e

import (
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestProcessControlMostEscape runs the unsandboxed control: a plain host
// process in a limited cgroup on the harness network. Most attempts must
// get through (that is its point), the bombs must stay bounded (the run
// completes, nothing is left), and the verdict must fail.
func TestProcessControlMostEscape(t *testing.T) {
	r := sharedRun(t, "process.yaml", false) // TestReferenceResults reads it too
	rec := r.mustRecord(t)
	if r.code != 1 {
		t.Errorf("exit code %d, want 1 (criteria fail)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if len(rec.Errors) > 0 {
		t.Errorf("harness errors: %v", rec.Errors)
	}
	attempts, escaped := 0, 0
	byID := map[string]probes.Spec{}
	for _, s := range probes.Catalog() {
		byID[s.ID] = s
	}
	for i, res := range rec.Results {
		s := byID[res.Probe]
		if s.Informational || s.ExpectedOn(rec.Runner, rec.Target.Profile) != probes.Blocked {
			continue
		}
		attempts++
		if rec.Effective(i) == probes.Escaped {
			escaped++
		} else {
			t.Logf("%s: %s (%s)", res.Probe, rec.Effective(i), res.Detail)
		}
	}
	t.Logf("%d of %d attempts escaped the unsandboxed control", escaped, attempts)
	if attempts == 0 || escaped*2 <= attempts {
		t.Errorf("only %d of %d attempts escaped a plain host process", escaped, attempts)
	}
	if rec.Verdict == nil || rec.Verdict.Pass {
		t.Errorf("verdict %+v: the unsandboxed control must fail", rec.Verdict)
	}
	for _, sb := range rec.Sandboxes {
		if len(sb.Teardown) > 0 {
			t.Errorf("sandbox %s left %v", sb.Name, sb.Teardown)
		}
	}
}
