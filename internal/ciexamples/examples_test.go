package ciexamples

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCIExamplesRun runs each CI example's nightly job on this machine, in
// order and under its CI system's shell. GitHub's job runs twice: a first
// night on the hardened reference (the job passes, every report lands, the
// baseline is cached) and a second night on the same target with
// no_new_privileges turned off (the probes' step fails, the comparison with
// the cached baseline fails on its own, the reports still land, the job
// fails). GitLab's runs that second night, against the first night's
// record; its rules are checked for each pipeline source.
func TestCIExamplesRun(t *testing.T) {
	m := newMachine(t)

	t.Run("github-actions", func(t *testing.T) {
		m.t = t
		wf := loadGitHub(t, m.root)
		const compare = "Compare with the previous scheduled run"
		const probes = "Run the probes"

		m.newWorkspace(nil)
		night1 := m.runGitHub(t, wf, "schedule", "1001")
		if night1.failed {
			t.Fatalf("first night failed: %v", night1.outcomes)
		}
		for name, o := range night1.outcomes {
			if o != "success" {
				t.Errorf("first night: step %q %s, want success", name, o)
			}
		}
		for _, f := range []string{"run.json", "results.sarif", "junit.xml", "report.html", "summary.md", "risks.json"} {
			if _, err := os.Stat(filepath.Join(m.ws, "out", f)); err != nil {
				t.Errorf("first night: out/%s: %v", f, err)
			}
		}
		if s, _ := os.ReadFile(night1.summary); !strings.Contains(string(s), "PASS") {
			t.Errorf("first night: the job summary does not carry the verdict:\n%s", s)
		}
		stored, err := os.ReadFile(filepath.Join(m.cache, "sandcheck-baseline-1001", "baseline", "run.json"))
		if err != nil {
			t.Fatalf("first night: no baseline cached: %v", err)
		}
		if err := os.WriteFile(m.night1, stored, 0o644); err != nil {
			t.Fatal(err)
		}

		m.newWorkspace(weaken)
		night2 := m.runGitHub(t, wf, "schedule", "1002")
		if !night2.failed {
			t.Fatalf("second night (no_new_privileges off) passed: %v", night2.outcomes)
		}
		want := map[string]string{probes: "failure", compare: "failure",
			"Upload SARIF to code scanning": "success", "Publish the JUnit results": "success",
			"Keep the reports": "success", "Keep tonight's run as the next baseline": "success"}
		for name, o := range want {
			if night2.outcomes[name] != o {
				t.Errorf("second night: step %q %s, want %s", name, night2.outcomes[name], o)
			}
		}
		if !strings.Contains(night2.outputs[compare], "privilege.no-new-privs") {
			t.Errorf("second night: the comparison does not name the regressed probe:\n%s", tail(night2.outputs[compare], 40))
		}

		// The example's shell is what makes that step fail: under
		// GitHub's default (bash -e, no pipefail) tee's exit status hides
		// the regression.
		step := findStep(t, wf, compare)
		script, err := night2.expand(step.Run)
		if err != nil {
			t.Fatal(err)
		}
		env := []string{"GITHUB_STEP_SUMMARY=" + filepath.Join(m.tmp, "default-shell.md")}
		if code, out := m.shellStep(t.Context(), []string{"bash", "-e"}, script, env, "compare under bash -e"); code != 0 {
			t.Errorf("under GitHub's default shell the comparison exits %d; the contrast this check draws is gone:\n%s", code, tail(out, 20))
		}
	})

	t.Run("gitlab-ci", func(t *testing.T) {
		m.t = t
		p := loadGitLab(t, m.root)
		for source, jobs := range map[string][]string{
			"schedule":            {"sandcheck:nightly"},
			"merge_request_event": {"sandcheck"},
			"push":                {"sandcheck"},
		} {
			if got := p.selected(t, source); !reflect.DeepEqual(got, jobs) {
				t.Errorf("a %s pipeline runs %v, want %v", source, got, jobs)
			}
		}

		// One night, on the regressed target, against the hardened night
		// the GitHub job stored (the same target, so the same baseline a
		// first GitLab night would have cached; a build and a run fewer).
		base, err := os.ReadFile(m.night1)
		if err != nil {
			t.Fatalf("no hardened night to compare with (the github-actions part failed before storing it): %v", err)
		}
		dir := filepath.Join(m.cache, "sandcheck-baseline", "baseline")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run.json"), base, 0o644); err != nil {
			t.Fatal(err)
		}
		m.newWorkspace(weaken)
		night2 := m.runGitLab(t, p, "sandcheck:nightly", "schedule")
		if night2.code != 1 {
			t.Errorf("second night (no_new_privileges off): exit %d, want 1\n%s", night2.code, tail(night2.out, 40))
		}
		diff, err := os.ReadFile(filepath.Join(m.ws, "diff.md"))
		if err != nil || !strings.Contains(string(diff), "privilege.no-new-privs") {
			t.Errorf("second night: diff.md does not name the regressed probe (%v):\n%s", err, diff)
		}
		if err := checkNonEmptyDir(filepath.Join(m.ws, "out", "history")); err != nil {
			t.Errorf("second night: history: %v", err)
		}
		if fi, err := os.Stat(filepath.Join(m.ws, "out", "summary.md")); err != nil || fi.Size() == 0 {
			t.Errorf("second night: out/summary.md: %v", err)
		}
	})
}

func findStep(t *testing.T, wf ghWorkflow, name string) ghStep {
	t.Helper()
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Name == name {
				return s
			}
		}
	}
	t.Fatalf("no step %q", name)
	return ghStep{}
}
