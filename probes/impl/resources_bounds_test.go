package impl

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// TestCPUDeadlineBurnsPastTheSetBound: with the harness's bound (past a
// declared 6 s budget) the child burns past 4 s, the old fixed burn, which
// a platform with a longer budget never met (issue 16 item 4). A short
// bound keeps the test quick; the child stops at it, not at 4 s.
func TestCPUDeadlineBurnsPastTheSetBound(t *testing.T) {
	if testing.Short() {
		t.Skip("burns CPU")
	}
	for _, ms := range []int64{600, 4600} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		p := probes.Params{Bounds: &probes.Bounds{CPUMsec: ms}}
		r := cpuDeadline(ctx, p)
		cancel()
		if r.Outcome != probes.Escaped {
			t.Fatalf("bound %d ms: outcome %s (%s) %v", ms, r.Outcome, r.Detail, r.Evidence)
		}
		reached, _ := strconv.ParseInt(r.Evidence["reached_ms"], 10, 64)
		if r.Evidence["bound_ms"] != strconv.FormatInt(ms, 10) || reached < ms || reached > ms+500 {
			t.Errorf("bound %d ms: burned %d ms, evidence %v", ms, reached, r.Evidence)
		}
	}
}

// TestLimitProbesTakeTheSetBound: each limit probe reads its bound from the
// parameters, and keeps its catalog default without one.
func TestLimitProbesTakeTheSetBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(context.Context, probes.Params) probes.Result
		set  probes.Bounds
		key  string
		want string
	}{
		{"fd-exhaustion", fdExhaustion, probes.Bounds{Files: 40}, "bound", "40"},
		{"fork-bomb", forkBomb, probes.Bounds{Processes: 3}, "bound", "3"},
	} {
		r := tc.run(context.Background(), probes.Params{Bounds: &tc.set})
		if r.Evidence[tc.key] != tc.want {
			t.Errorf("%s with bound %s: evidence %v", tc.name, tc.want, r.Evidence)
		}
		if r.Outcome != probes.Escaped && r.Outcome != probes.Blocked {
			t.Errorf("%s: outcome %s (%s)", tc.name, r.Outcome, r.Detail)
		}
	}
	if b := probes.Bound(bounds(probes.Params{}).Files, fdBound); b != 4096 {
		t.Errorf("default fd bound %d", b)
	}
	if s, err := bombStream(40); err != nil || len(s) == 0 {
		t.Errorf("bomb stream for 40 MiB: %v", err)
	}
}

// TestOversizeWritesPastTheSetBound: output.oversize writes past a declared
// per-file bound larger than its default 4 MiB (a release bounded at 5 MiB
// per file would otherwise release the 4 MiB file and be graded unbounded).
func TestOversizeWritesPastTheSetBound(t *testing.T) {
	dir := t.TempDir()
	n := int64(5<<20 + 64<<10)
	r := oversizeProbe(context.Background(), probes.Params{Token: "tok", OutputDir: dir, Bounds: &probes.Bounds{OutputFileBytes: n}})
	if r.Evidence["bytes"] != strconv.FormatInt(n, 10) {
		t.Fatalf("evidence %v", r.Evidence)
	}
	st, err := os.Stat(filepath.Join(dir, probes.OutputArtifactPrefix("tok", "output.oversize")+".bin"))
	if err != nil || st.Size() != n {
		t.Errorf("planted file: %v, %v", st, err)
	}
	r = oversizeProbe(context.Background(), probes.Params{Token: "tok2", OutputDir: dir})
	if r.Evidence["bytes"] != strconv.Itoa(oversizeBytes) {
		t.Errorf("default: evidence %v", r.Evidence)
	}
}
