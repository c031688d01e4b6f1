package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// platformTarget writes a copy of the hardened reference whose sandboxes
// carry a platform's own identity labels (acme.io/..., the platform's
// values, not sandcheck's run ID) instead of labels naming sandcheck's run,
// target and task, and declares them with attribution:.
func platformTarget(t *testing.T, labels string) string {
	t.Helper()
	old := "  labels:\n    platform.run: \"${SANDCHECK_RUN_ID}\"\n    platform.target: \"${SANDCHECK_TARGET}\"\n    platform.task: \"${SANDCHECK_TASK}\"\n"
	p := editedReference(t, "hardened.yaml", "acme.yaml", edit{old, "  labels:\n" + labels})
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("attribution: {run: acme.io/session, task: acme.io/task, policy: acme.io/policy}\n"); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAttribution runs the attribution probes against a target and returns
// the exit code and the attributable-policy criterion.
func runAttribution(t *testing.T, target string) (int, evidence.Criterion) {
	t.Helper()
	r := sandcheck(t, "run", "--target", target, "--probes", "attribution.*", "-q")
	t.Logf("sandcheck run:\n%s%s", r.stdout, r.stderr)
	rec := r.mustRecord(t)
	if rec.Verdict == nil {
		t.Fatal("no verdict")
	}
	c := criterion(rec, "attributable-policy")
	if c.ID == "" {
		t.Fatal("no attributable-policy criterion")
	}
	for _, reason := range c.Reasons {
		t.Logf("  %s: %s", c.Status, reason)
	}
	return r.code, c
}

// TestPlatformIdentitiesAttribute: sandboxes labelled with the platform's
// own identities (acme.io/session, acme.io/task, acme.io/policy) that the
// target declares pass attributable-policy. Before, the criterion required
// labels naming sandcheck's run, target and task and failed them ("no
// label names the run, the target, the task").
func TestPlatformIdentitiesAttribute(t *testing.T) {
	code, c := runAttribution(t, platformTarget(t,
		"    acme.io/session: sess-4711\n    acme.io/task: \"job-${SANDCHECK_TASK}\"\n    acme.io/policy: no-network-v3\n"))
	if c.Status != "pass" || code != 0 {
		t.Errorf("attributable-policy %s, exit %d: want pass, 0", c.Status, code)
	}
	found := false
	for _, r := range c.Reasons {
		found = found || strings.Contains(r, "run sess-4711")
	}
	if !found {
		t.Error("the pass does not name the platform's run identity")
	}
}

// TestPlatformIdentitiesMissing: the same declaration with sandboxes that
// lack the policy label fails, naming the sandbox and the label.
func TestPlatformIdentitiesMissing(t *testing.T) {
	code, c := runAttribution(t, platformTarget(t,
		"    acme.io/session: sess-4711\n    acme.io/task: \"job-${SANDCHECK_TASK}\"\n"))
	if c.Status != "fail" || code != 1 {
		t.Errorf("attributable-policy %s, exit %d: want fail, 1", c.Status, code)
	}
	found := false
	for _, r := range c.Reasons {
		found = found || strings.Contains(r, "carries no policy identity: the platform's label acme.io/policy")
	}
	if !found {
		t.Error("no reason names the missing acme.io/policy label")
	}
}
