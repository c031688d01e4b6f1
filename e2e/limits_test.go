package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// budgetTarget writes a copy of the hardened reference with another CPU
// time budget and returns its path.
func budgetTarget(t *testing.T, budget string) string {
	t.Helper()
	return editedReference(t, "hardened.yaml", "budget-"+budget+".yaml", edit{"cpu_time: 3s", "cpu_time: " + budget})
}

// runCPUDeadline runs resources.cpu-deadline against a target and returns
// the exit code and its result.
func runCPUDeadline(t *testing.T, target string) (int, evidence.Result, *evidence.Record) {
	t.Helper()
	r := sandcheck(t, "run", "--target", target, "--probes", "resources.cpu-deadline", "-v")
	t.Logf("sandcheck run (%s):\n%s%s", filepath.Base(target), r.stdout, r.stderr)
	rec := r.mustRecord(t)
	for _, res := range rec.Results {
		if res.Probe == "resources.cpu-deadline" {
			return r.code, res, rec
		}
	}
	t.Fatal("no resources.cpu-deadline result")
	return 0, evidence.Result{}, nil
}

// TestCPUBudgetLongerThanTheOldBurn: a platform whose per-task CPU budget
// (6 s) is longer than the probe's old fixed 4 s burn. Before, the probe
// burned 4 s, finished, reported escaped and the run failed: "no budget".
// Now it burns past the declared budget, the watchdog kills the sandbox at
// 6 s and the budget is graded as holding (exit 0).
//
// 25 s also checks the probe binary's own deadline grows with the bound:
// before the harness sent its timeouts, the probe cut itself at 24 s (80%
// of the catalog's 30 s), short of the budget.
func TestCPUBudgetLongerThanTheOldBurn(t *testing.T) {
	for _, b := range []string{"6s", "25s"} {
		t.Run(b, func(t *testing.T) { cpuBudgetHolds(t, b) })
	}
}

func cpuBudgetHolds(t *testing.T, budget string) {
	want, err := time.ParseDuration(budget)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, r, _ := runCPUDeadline(t, budgetTarget(t, budget))
	t.Logf("took %s: outcome %s, %s", time.Since(start).Round(time.Second), r.Outcome, r.Detail)
	var killed *evidence.Item
	for i, it := range r.Evidence {
		t.Logf("  %s/%s %s: %s %v", it.Source, it.Kind, it.Indicates, it.Summary, it.Data)
		if it.Kind == "cpu-budget-killed" {
			killed = &r.Evidence[i]
		}
	}
	if killed == nil {
		t.Fatalf("the watchdog did not kill the sandbox at its %s budget", budget)
	}
	used, err := time.ParseDuration(killed.Data["used"])
	if err != nil || used < want {
		t.Errorf("killed at %q of CPU, want past the %s budget", killed.Data["used"], budget)
	}
	if code != 0 {
		t.Errorf("exit %d, want 0: the declared budget held", code)
	}
}

// TestCPUBudgetAboveTheProfileMaximum: a budget above the maximum the
// profile allows (a minute) is not pushed past; the probe is not run and
// the run fails with the reason, never a silent pass.
func TestCPUBudgetAboveTheProfileMaximum(t *testing.T) {
	code, r, rec := runCPUDeadline(t, budgetTarget(t, "10m"))
	if code != 1 {
		t.Errorf("exit %d, want 1 (the budget does not bound the task as the profile requires)", code)
	}
	found := false
	for _, it := range r.Evidence {
		if it.Kind == "limit-above-maximum" && it.Indicates == "escaped" && strings.Contains(it.Summary, "10m0s") && strings.Contains(it.Summary, "1m0s") {
			found = true
		}
	}
	if !found || !strings.Contains(r.Detail, "above") {
		t.Errorf("no clear reason: detail %q, evidence %+v", r.Detail, r.Evidence)
	}
	if rec.Verdict == nil || rec.Verdict.Pass {
		t.Fatalf("verdict %+v, want a failure", rec.Verdict)
	}
	reason := false
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "bounded-resources" {
			t.Logf("bounded-resources %s: %v", c.Status, c.Reasons)
			for _, s := range c.Reasons {
				reason = reason || strings.Contains(s, "above")
			}
		}
	}
	if !reason {
		t.Error("the failing criterion does not give the reason")
	}
}

// TestSizelessTmpfsIsGraded: a scratch tmpfs without a size (Docker's
// --tmpfs /scratch, capped only by half the host's memory) validates and
// runs as Docker runs it; the disk fill reaches its own bound there and
// bounded-resources fails. Before, the target was refused. The memory
// limit is raised past the fill's bound: tmpfs pages are charged to the
// sandbox's memory cgroup, so under the reference's 128 MiB the fill is
// stopped by the OOM killer instead.
func TestSizelessTmpfsIsGraded(t *testing.T) {
	target := editedReference(t, "hardened.yaml", "sizeless-scratch.yaml",
		edit{"- {path: /scratch, size: 32Mi, nr_inodes: 4096}", "- {path: /scratch}"},
		edit{"memory: 128Mi", "memory: 1Gi"})
	if r := sandcheck(t, "targets", "validate", target); r.code != 0 {
		t.Fatalf("targets validate: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := sandcheck(t, "run", "--target", target, "--probes", "resources.disk-fill", "-v")
	t.Logf("sandcheck run:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: the unbounded scratch fails bounded-resources", r.code)
	}
	rec := r.mustRecord(t)
	var fill *evidence.Result
	for i := range rec.Results {
		if rec.Results[i].Probe == "resources.disk-fill" {
			fill = &rec.Results[i]
		}
	}
	if fill == nil || fill.Outcome != "escaped" || !strings.Contains(fill.Detail, "/scratch") {
		t.Fatalf("resources.disk-fill: %+v, want escaped in /scratch", fill)
	}
	failed := false
	for _, c := range rec.Verdict.Criteria {
		failed = failed || (c.ID == "bounded-resources" && c.Status == "fail")
	}
	if !failed {
		t.Errorf("bounded-resources did not fail: %+v", rec.Verdict.Criteria)
	}
}

// TestSizelessTmpfsUnderAMemoryLimit: the same size-less scratch under the
// reference's 128 MiB memory limit. The tmpfs pages are charged to the
// sandbox's memory cgroup, so the kernel's OOM killer stops the fill: the
// probe dies with no report (exit 137), and the host reads the kill in the
// cgroup's own count, so the fill is contained, in the kernel's words.
// Before, the result was inconclusive with "exited with code 137:" and no
// cause.
func TestSizelessTmpfsUnderAMemoryLimit(t *testing.T) {
	target := editedReference(t, "hardened.yaml", "sizeless-scratch-128Mi.yaml",
		edit{"- {path: /scratch, size: 32Mi, nr_inodes: 4096}", "- {path: /scratch}"})
	r := sandcheck(t, "run", "--target", target, "--probes", "resources.disk-fill", "-v")
	t.Logf("sandcheck run:\n%s%s", r.stdout, r.stderr)
	rec := r.mustRecord(t)
	var fill *evidence.Result
	for i := range rec.Results {
		if rec.Results[i].Probe == "resources.disk-fill" {
			fill = &rec.Results[i]
		}
	}
	if fill == nil {
		t.Fatal("no resources.disk-fill result")
	}
	oom, ok := hostItem(*fill, evidence.SourceRuntime, "oom-killed")
	if !ok || oom.Indicates != "blocked" {
		t.Fatalf("resources.disk-fill: %s (%s), no blocked runtime/oom-killed item: %+v", fill.Outcome, fill.Detail, fill.Evidence)
	}
	if !strings.Contains(fill.Detail, "killed by SIGKILL") {
		t.Errorf("detail %q does not name the signal", fill.Detail)
	}
	for _, c := range rec.Verdict.Criteria {
		if c.ID == "bounded-resources" && c.Status != "pass" {
			t.Errorf("bounded-resources %s, want pass: the memory limit held the fill: %v", c.Status, c.Reasons)
		}
	}
}

// TestWritableHostSubmountsAreSeenAndCleaned: a bind of / read-only and a
// bind of /dev (as root): Docker's ro is not recursive, so the host's
// submounts under them (/dev/shm, /var/lib/docker, ...) stay writable.
// The runtime view names them from the container's own mount table, and
// the teardown probe's token files planted there are found after the run
// and removed. Before, the host read "0 writable host folder(s)" and the
// files stayed on the host.
func TestWritableHostSubmountsAreSeenAndCleaned(t *testing.T) {
	for _, c := range []struct{ name, mount, want string }{
		{"root-ro", "- {source: /, target: /host, read_only: true}", "/host/dev/shm"},
		{"dev", "- {source: /dev, target: /dev}", "/dev/shm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := editedReference(t, "hardened.yaml", c.name+".yaml",
				edit{`user: "65534:65534"`, `user: "0:0"`},
				edit{"  tmpfs:\n", "  mounts:\n    " + c.mount + "\n  tmpfs:\n"})
			r := sandcheck(t, "run", "--target", target, "--probes", "teardown.scratch", "-v")
			t.Logf("sandcheck run:\n%s%s", r.stdout, r.stderr)
			rec := r.mustRecord(t)
			if len(rec.Errors) > 0 {
				t.Fatalf("harness errors: %v", rec.Errors)
			}
			named := false
			var sources []string
			for _, sb := range rec.Sandboxes {
				if sb.View == nil {
					continue
				}
				for _, m := range sb.View.Mounts {
					if !m.ReadOnly && m.Type == "bind" {
						sources = append(sources, m.Source)
						named = named || m.Destination == c.want
					}
				}
			}
			if !named {
				t.Errorf("the runtime view does not name %s writable: %v", c.want, sources)
			}
			var res *evidence.Result
			for i := range rec.Results {
				if rec.Results[i].Probe == "teardown.scratch" {
					res = &rec.Results[i]
				}
			}
			if res == nil {
				t.Fatal("no teardown.scratch result")
			}
			// The probe may take the host's /dev/shm for its own tmpfs; the
			// host's find after close settles it.
			failed := false
			for _, c := range rec.Verdict.Criteria {
				failed = failed || (c.ID == "verified-teardown" && c.Status == "fail")
			}
			if !failed {
				t.Errorf("verified-teardown did not fail: %+v", rec.Verdict.Criteria)
			}
			it, ok := hostItem(*res, evidence.SourceTeardown, "teardown.scratch")
			if !ok || it.Indicates != "escaped" || !strings.Contains(it.Summary, "/dev/shm/"+probes.TeardownPrefix) {
				t.Errorf("teardown evidence %+v, want the token file in /dev/shm found", it)
			}
			// Nothing of the probe's is left in any writable host folder.
			for _, dir := range append(sources, "/dev/shm", "/var/lib/docker") {
				left, _ := filepath.Glob(filepath.Join(dir, probes.TeardownPrefix+"*"))
				for _, f := range left {
					t.Errorf("left on the host: %s", f)
					_ = os.Remove(f)
				}
			}
		})
	}
}
