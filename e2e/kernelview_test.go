package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// kernelViewProbes make one distinctive syscall each (acct, setns) with
// harmless arguments.
const kernelViewProbes = "syscalls.acct,syscalls.setns"

// TestKernelViewWherever holds the tracer to its job wherever a sandbox's
// processes are on this host: a wrapper's (a task, and each exec'd
// invocation, held for the tracer), a docker sandbox sharing the host's pid
// namespace (the weak reference: each docker exec found in its mount
// namespace) and a runc sandbox of its own launched by exec. Each run's
// record says every sandbox was watched, and each probe's own syscall is
// in the kernel's count for that probe: the wrapper's own setns (nsenter's,
// into the sandbox's network namespace) never is. The negative controls:
// a platform's sandbox the host cannot see, and a run with the tracer off,
// read "not watched" with why, in the record and in the matrix.
func TestKernelViewWherever(t *testing.T) {
	binDir(t)
	dirs := map[string]string{}
	keep := t.TempDir() // the runs' folders outlive their subtests, for the matrix
	for _, c := range []struct {
		name, target, scope string
	}{
		{"wrapper task", "fixtures/targets/wrapper-bwrap.yaml", "process-tree"},
		{"wrapper exec", execWrapperTarget(t), "process-tree"},
		{"pid host exec", "fixtures/targets/weak.yaml", "mount-namespace"},
		{"runc exec", execTarget(t, "hardened.yaml"), "pid-namespace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.target, "wrapper") {
				requireWrapperTools(t)
			}
			out := filepath.Join(keep, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			r := sandcheckIn(t, out, "run", "--target", c.target, "--probes", kernelViewProbes, "--quiet")
			rec := r.mustRecord(t)
			if r.code == 2 {
				t.Fatalf("exit 2 (a harness error)\n%s", r.stderr)
			}
			dirs[c.name] = r.out
			tr := rec.Tracer
			if tr == nil || tr.Status != evidence.TracerOn || len(tr.Sandboxes) == 0 {
				t.Fatalf("tracer %+v: want on, with its sandboxes", tr)
			}
			for _, s := range tr.Sandboxes {
				if s.Unwatched != "" || s.Scope != c.scope {
					t.Errorf("sandbox %s: scope %q, unwatched %q; want watched by %s", s.ID, s.Scope, s.Unwatched, c.scope)
				}
			}
			for _, res := range rec.Results {
				name := strings.TrimPrefix(res.Probe, "syscalls.")
				var own *evidence.Item
				for i, it := range res.Evidence {
					if it.Source != evidence.SourceTracer {
						continue
					}
					switch it.Kind {
					case "tracer-syscall", "tracer-syscall-unconfirmed":
						own = &res.Evidence[i]
					case "tracer-no-process", "tracer-unwatched", "tracer-error":
						t.Errorf("%s: %s", res.Probe, it.Summary)
					}
					if strings.Contains(it.Summary, "gVisor") {
						t.Errorf("%s: a message about gVisor on a %s run: %s", res.Probe, c.name, it.Summary)
					}
				}
				if own == nil || own.Data["syscall"] != name {
					t.Errorf("%s: no kernel count of its own %s call: %+v", res.Probe, name, res.Evidence)
					continue
				}
				calls, err := strconv.Atoi(own.Data["calls"])
				if err != nil || calls < 1 {
					t.Errorf("%s: the kernel counted %q %s calls for the probe, want its own: %s", res.Probe, own.Data["calls"], name, own.Summary)
				}
				if name == "setns" && own.Data["ok"] != "0" {
					// The probe's setns has harmless arguments and never
					// succeeds; nsenter's (the wrapper runner's) does.
					t.Errorf("%s: %s setns calls succeeded in the probe's count: the runner's own were taken for the probe's (%s)", res.Probe, own.Data["ok"], own.Summary)
				}
				t.Logf("%s: %s", res.Probe, own.Summary)
			}
		})
	}
	t.Run("not watched", func(t *testing.T) {
		r := sandcheck(t, "run", "--target", "fixtures/targets/command-weak.yaml", "--probes", "syscalls.acct", "--quiet")
		rec := r.mustRecord(t)
		if r.code == 2 {
			t.Fatalf("exit 2 (a harness error)\n%s", r.stderr)
		}
		tr := rec.Tracer
		if tr == nil || len(tr.Sandboxes) == 0 {
			t.Fatalf("tracer %+v: want each unwatched sandbox recorded", tr)
		}
		for _, s := range tr.Sandboxes {
			if s.Unwatched == "" || len(s.Syscalls) != 0 {
				t.Errorf("sandbox %s of a platform the host does not see: unwatched %q, %d syscalls; want not watched, with why", s.ID, s.Unwatched, len(s.Syscalls))
			}
		}
		var saw bool
		for _, res := range rec.Results {
			for _, it := range res.Evidence {
				if it.Kind == "tracer-unwatched" {
					saw = strings.HasPrefix(it.Summary, "tracer: the sandbox was not watched: its runner names no host process")
					t.Logf("%s: %s", res.Probe, it.Summary)
				}
			}
		}
		if !saw {
			t.Error("no probe's evidence says its sandbox was not watched, and why")
		}
		// The record, unwatched sandboxes and all, is what the published
		// schema says: it re-grades.
		if ev := sandcheck(t, "policy", "eval", "--input", filepath.Join(r.out, "run.json")); ev.code == 2 {
			t.Errorf("re-grading the record: exit 2\n%s", ev.stderr)
		}
		off := sandcheck(t, "run", "--target", "fixtures/targets/wrapper-bwrap.yaml", "--probes", "syscalls.acct", "--quiet", "--trace=false")
		off.mustRecord(t)
		if dirs["wrapper task"] == "" || dirs["pid host exec"] == "" {
			t.Fatal("the watched runs gave no record (see their subtests)")
		}
		cmp := sandcheck(t, "compare", dirs["wrapper task"], dirs["pid host exec"], off.out, r.out)
		if cmp.code != 0 {
			t.Fatalf("compare: exit %d\n%s%s", cmp.code, cmp.stdout, cmp.stderr)
		}
		var row string
		for _, l := range strings.Split(cmp.stdout, "\n") {
			if strings.HasPrefix(l, "| Host kernel surface |") {
				row = l
			}
		}
		t.Logf("the matrix: %s", row)
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 5 || strings.Count(row, "watched, ") != 2 || !strings.Contains(row, "not watched: tracer off") ||
			!strings.Contains(row, "not traced (remote platform)") || strings.Contains(row, " 0 syscalls") {
			t.Errorf("the matrix's surface row %q: want the two watched runs as \"watched, N syscalls\", the run without a tracer as \"not watched: tracer off\", the platform's as not traced", row)
		}
	})
}

// execWrapperTarget is the bubblewrap wrapper reference launching its tasks
// by exec: one wrapper sandbox, each probe one invocation of the wrapper.
func execWrapperTarget(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../fixtures/targets/wrapper-bwrap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if !strings.Contains(src, "launch: task") {
		t.Fatal("the reference wrapper-bwrap.yaml no longer has \"launch: task\"; update the test that edits it")
	}
	p := filepath.Join(t.TempDir(), "exec-wrapper-bwrap.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(src, "launch: task", "launch: exec", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
