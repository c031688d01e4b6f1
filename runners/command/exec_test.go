package command

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// shTool is a platform tool written in sh: exec runs script with the
// command's words as $1..., everything else succeeds.
func shTool(t *testing.T, script string) *Runner {
	t.Helper()
	r, err := New(targets.Command{
		Network: "none", Timeout: "2s",
		Create:  []string{"sh", "-c", "echo box1"},
		Exec:    []string{"sh", "-c", script, "tool", "${ARGV}"},
		CopyIn:  []string{"true"},
		Destroy: []string{"true"},
	}, "img", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A platform exec that hangs (even for the probe binary's list) is a
// harness error naming the step and both bounds, and every later exec of
// the runner fails at once with the same error.
func TestHungExecIsAHarnessError(t *testing.T) {
	r := shTool(t, "exec sleep 60")
	s := &Sandbox{r: r, id: "box1"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := s.Exec(ctx, []string{"/.sandcheck/sandcheck-probe", "run", "x"})
	if !errors.Is(err, runners.ErrExecStuck) {
		t.Fatalf("hung exec: want ErrExecStuck, got %v", err)
	}
	for _, want := range []string{"command exec (sh)", "within 1s for a probe", "nor within 2s", "sandcheck-probe list", "box1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the hung exec took %s (bounds 1s + 2s)", d)
	}
	t1 := time.Now()
	_, err2 := (&Sandbox{r: r, id: "box2"}).Exec(t.Context(), []string{"/.sandcheck/sandcheck-probe", "run", "y"})
	if !errors.Is(err2, runners.ErrExecStuck) || err2.Error() != err.Error() || time.Since(t1) > time.Second {
		t.Fatalf("later exec: %v after %s, want the same error at once", err2, time.Since(t1))
	}
	// Nor does a stuck runner start another sandbox.
	if _, err := r.Start(t.Context(), runners.SandboxSpec{Name: "t", ProbeDir: t.TempDir()}); !errors.Is(err, runners.ErrStart) || !errors.Is(err, runners.ErrExecStuck) {
		t.Fatalf("start after the exec step hung: %v", err)
	}
}

// A probe that hangs while the platform's exec still answers (list
// returns) keeps the exec's own error: the engine makes it the probe's
// inconclusive timeout, not a harness error, and later execs run.
func TestHungProbeIsNotAHungExec(t *testing.T) {
	r := shTool(t, `case "$2" in list) echo ok;; *) exec sleep 60;; esac`)
	s := &Sandbox{r: r, id: "box1"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := s.Exec(ctx, []string{"/.sandcheck/sandcheck-probe", "run", "x"})
	if err == nil || errors.Is(err, runners.ErrExecStuck) {
		t.Fatalf("hung probe: want the exec's timeout error, not ErrExecStuck: %v", err)
	}
	res, err := s.Exec(t.Context(), listArgv)
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("later exec: %+v, %v", res, err)
	}
}
