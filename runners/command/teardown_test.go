package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// fakePlatform is a platform tool in sh keeping its state in a folder:
// create prints box1, destroy runs destroy (a script), list runs list.
func fakePlatform(t *testing.T, destroy, list string) (runners.Sandbox, string) {
	t.Helper()
	state := t.TempDir()
	probe := t.TempDir()
	if err := os.WriteFile(filepath.Join(probe, runners.ProbeBinary), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := targets.Command{
		Network: "none", Timeout: "3s",
		Create:  []string{"sh", "-c", "touch live; echo box1"},
		Exec:    []string{"sh", "-c", "exit 0", "tool", "${ARGV}"},
		CopyIn:  []string{"true", "${SRC}"},
		Destroy: []string{"sh", "-c", destroy, "tool", "${ID}"},
	}
	if list != "" {
		cfg.List = []string{"sh", "-c", list}
	}
	// The steps run in the state folder.
	t.Chdir(state)
	r, err := New(cfg, "img", nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.Start(t.Context(), runners.SandboxSpec{Name: "t", ProbeDir: probe})
	if err != nil {
		t.Fatal(err)
	}
	return sb, state
}

// After destroy the target's list must stop naming the sandbox: one still
// listed is a leftover naming it (a destroy that returned too early), one
// listed for a moment is not, and a list that fails is a check not made.
func TestDestroyCheckedByList(t *testing.T) {
	const listLive = `[ -e live ] && echo box1; echo other-box; exit 0`
	cases := []struct {
		name, destroy, list string
		left                string // leftover wanted, "" for none
		fails               bool
	}{
		{"removed", "rm -f live", listLive, "", false},
		{"still there", "exit 0", listLive, "sandbox box1 (still listed", false},
		{"gone after a moment", "(sleep 0.5; rm -f live) >/dev/null 2>&1 &", listLive, "", false},
		{"list fails", "rm -f live", "echo broken >&2; exit 3", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb, _ := fakePlatform(t, c.destroy, c.list)
			if err := sb.Close(t.Context()); err != nil {
				t.Fatalf("close: %v", err)
			}
			tv, ok := sb.(runners.TeardownVerifier)
			if !ok {
				t.Fatal("a sandbox of a target with a list step does not verify its teardown")
			}
			t0 := time.Now()
			left, err := tv.VerifyTeardown(t.Context())
			if d := time.Since(t0); d > 6*time.Second {
				t.Errorf("the check took %s (bound: the target's 3s timeout)", d)
			}
			switch {
			case c.fails:
				if err == nil || !strings.Contains(err.Error(), "exited 3") {
					t.Fatalf("failing list: %v, %v", left, err)
				}
			case err != nil:
				t.Fatalf("check: %v", err)
			case c.left == "" && len(left) > 0:
				t.Fatalf("leftovers %v, want none", left)
			case c.left != "" && (len(left) != 1 || !strings.Contains(left[0], c.left)):
				t.Fatalf("leftovers %v, want one naming %q", left, c.left)
			}
		})
	}
	t.Run("no list step", func(t *testing.T) {
		sb, _ := fakePlatform(t, "rm -f live", "")
		if _, ok := sb.(runners.TeardownVerifier); ok {
			t.Fatal("without a list step the sandbox claims to verify its teardown")
		}
		if err := sb.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
