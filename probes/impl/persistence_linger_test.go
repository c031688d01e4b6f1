package impl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func TestHasArgs(t *testing.T) {
	argv := []string{"sandcheck-probe", "child", "linger", "plain", "m1", "90"}
	if !hasArgs(argv, []string{"child", "linger", "plain", "m1"}) {
		t.Error("a matching command line was missed")
	}
	for _, want := range [][]string{{"child", "linger", "plain", "m2"}, {"linger", "child"}, append(argv, "x")} {
		if hasArgs(argv, want) {
			t.Errorf("%v matched %v", want, argv)
		}
	}
}

// TestLingerPlantThenCheck plants each kind of lingering process from this
// test binary (standing in for the probe binary) and finds and kills it as
// the next task would.
func TestLingerPlantThenCheck(t *testing.T) {
	for kind := range lingerKinds {
		t.Run(kind, func(t *testing.T) {
			p := probes.Params{Marker: "t" + kind + strings.Repeat("0", 4), Phase: "plant"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := lingerProbe(ctx, p, kind)
			if r.Outcome != probes.NotApplicable || !strings.HasPrefix(r.Evidence["planted"], "up ") {
				t.Fatalf("plant: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
			p.Phase = "check"
			r = lingerProbe(ctx, p, kind)
			if r.Outcome != probes.Escaped {
				t.Fatalf("check: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
			// The check killed it: a second look finds nothing (give the
			// kernel a moment to reap; an orphan's parent here is init or
			// a subreaper, and a zombie of ours still shows its cmdline).
			reapChildren()
			deadline := time.Now().Add(5 * time.Second)
			for {
				r = lingerProbe(ctx, p, kind)
				if r.Outcome == probes.Blocked || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
				reapChildren()
			}
			if r.Outcome != probes.Blocked {
				t.Errorf("after the kill: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
		})
	}
}

func TestChildLingerRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"plain", "m"}, {"nosuch", "m", "5"}, {"plain", "m", "0"}, {"plain", "m", "100000"}} {
		if code := childLinger(args); code != 2 {
			t.Errorf("childLinger(%q) = %d, want 2", args, code)
		}
	}
}
