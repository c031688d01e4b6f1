//go:build cluster

package e2e

import (
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestKubernetesProbesControls runs the kubernetes family through the
// runner on the real cluster with the weak and the hardened pod templates
// as controls: on the weak template (token mounted, its account may list
// secrets and create pods, a quota on pod count only, privileged, hostPID,
// hostPath, the node's name in the environment) every probe must escape;
// on the hardened one every probe with a positive control must be blocked.
// A probe without a control (its spec says why) is only logged.
func TestKubernetesProbesControls(t *testing.T) {
	kubeconfig(t)
	family := probes.Catalog()
	var ids []probes.Spec
	for _, s := range family {
		if s.Category == "kubernetes" {
			ids = append(ids, s)
		}
	}
	if len(ids) < 7 {
		t.Fatalf("the catalog has %d kubernetes probes, want at least 7", len(ids))
	}
	for _, tc := range []struct {
		target string
		want   func(probes.Spec) (probes.Outcome, bool)
	}{
		{"fixtures/kubernetes/weak.yaml", negativeWant},
		{"fixtures/kubernetes/hardened.yaml", positiveWant("no-network-transform")},
	} {
		t.Run(strings.TrimSuffix(tc.target[strings.LastIndex(tc.target, "/")+1:], ".yaml"), func(t *testing.T) {
			r := sandcheck(t, "run", "--target", tc.target, "--probes", "kubernetes.*", "--trace=false", "-v")
			rec := r.mustRecord(t)
			if r.code == 2 {
				t.Fatalf("harness error (exit 2):\n%s\n%s", r.stdout, r.stderr)
			}
			got := map[string]int{}
			for i, res := range rec.Results {
				got[res.Probe] = i
			}
			for _, s := range ids {
				i, ok := got[s.ID]
				if !ok {
					t.Errorf("%s: no result", s.ID)
					continue
				}
				res := rec.Results[i]
				want, proven := tc.want(s)
				eff := rec.Effective(i)
				if !proven {
					t.Logf("%s: no control here (see its spec); effective %s: %s", s.ID, eff, res.Detail)
					continue
				}
				if eff != want {
					t.Errorf("%s: effective outcome %s, want %s (reported %s: %s; evidence %+v)", s.ID, eff, want, res.Outcome, res.Detail, res.Evidence)
				} else {
					t.Logf("%s: %s: %s", s.ID, eff, res.Detail)
				}
			}
			if len(rec.Errors) > 0 {
				t.Errorf("harness errors: %v", rec.Errors)
			}
		})
	}
	assertClusterClean(t)
}

// TestKubernetesProbesScoped holds the API probes to their reasons on a
// platform between the controls (fixtures/kubernetes/scoped.yaml): the
// token is mounted and may create pods, but RBAC refuses the secrets list
// and the namespace quota the oversized pod, so each of those is blocked
// for its own reason, not for want of a token.
func TestKubernetesProbesScoped(t *testing.T) {
	kubeconfig(t)
	r := sandcheck(t, "run", "--target", "fixtures/kubernetes/scoped.yaml", "--probes", "kubernetes.*", "--trace=false", "-v")
	rec := r.mustRecord(t)
	if r.code == 2 {
		t.Fatalf("harness error (exit 2):\n%s\n%s", r.stdout, r.stderr)
	}
	want := map[string]struct {
		outcome probes.Outcome
		detail  string
	}{
		"kubernetes.sa-token-api":      {probes.Escaped, "authenticates to the API server"},
		"kubernetes.rbac-list-secrets": {probes.Blocked, "HTTP 403"},
		"kubernetes.rbac-create-pods":  {probes.Escaped, "dry run was admitted"},
		"kubernetes.quota-escape":      {probes.Blocked, "exceeded quota"},
	}
	seen := 0
	for i, res := range rec.Results {
		w, ok := want[res.Probe]
		if !ok {
			continue
		}
		seen++
		if eff := rec.Effective(i); eff != w.outcome || !strings.Contains(res.Detail, w.detail) {
			t.Errorf("%s: %s (%s), want %s naming %q", res.Probe, eff, res.Detail, w.outcome, w.detail)
		} else {
			t.Logf("%s: %s: %s", res.Probe, eff, res.Detail)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d API probes have a result", seen, len(want))
	}
	assertClusterClean(t)
}
