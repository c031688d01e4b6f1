package ciexamples

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The parts of a GitHub Actions workflow the example uses; anything else in
// the file fails the strict decoding.
type ghWorkflow struct {
	Name        string            `yaml:"name"`
	On          any               `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Jobs        map[string]ghJob  `yaml:"jobs"`
}

type ghJob struct {
	RunsOn         string `yaml:"runs-on"`
	TimeoutMinutes int    `yaml:"timeout-minutes"`
	Defaults       struct {
		Run struct {
			Shell string `yaml:"shell"`
		} `yaml:"run"`
	} `yaml:"defaults"`
	Steps []ghStep `yaml:"steps"`
}

type ghStep struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	If   string            `yaml:"if"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

// ghShell is the argv GitHub's Linux runners run a step's script file with
// (the file's path appended): "bash" is `bash --noprofile --norc -eo
// pipefail {0}`, and with no shell named at all `bash -e {0}`.
func ghShell(shell string) ([]string, error) {
	switch shell {
	case "bash":
		return []string{"bash", "--noprofile", "--norc", "-eo", "pipefail"}, nil
	case "":
		return []string{"bash", "-e"}, nil
	case "sh":
		return []string{"sh", "-e"}, nil
	}
	return nil, fmt.Errorf("shell %q: not modelled", shell)
}

// ghRun is one run of the workflow's job: the event, the run's ID, and what
// each step did.
type ghRun struct {
	event, runID string
	env          map[string]string // the workflow's env, expressions resolved
	summary      string            // GITHUB_STEP_SUMMARY
	failed       bool
	outcomes     map[string]string // step name: success, failure or skipped
	outputs      map[string]string
}

var ghExpr = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// value resolves one context reference of the few the example uses.
func (r *ghRun) value(ref string) (string, error) {
	switch {
	case strings.HasPrefix(ref, "env."):
		v, ok := r.env[strings.TrimPrefix(ref, "env.")]
		if !ok {
			return "", fmt.Errorf("%s: not set", ref)
		}
		return v, nil
	case ref == "github.run_id":
		return r.runID, nil
	case ref == "github.event_name":
		return r.event, nil
	}
	return "", fmt.Errorf("context %q: not modelled", ref)
}

// expand replaces every ${{ … }} in s.
func (r *ghRun) expand(s string) (string, error) {
	var err error
	out := ghExpr.ReplaceAllStringFunc(s, func(m string) string {
		v, e := r.value(ghExpr.FindStringSubmatch(m)[1])
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	return out, err
}

var ghCompare = regexp.MustCompile(`^([a-z_.]+)\s*(==|!=)\s*'([^']*)'$`)

// cond evaluates a step's if: terms joined by &&, each a status function
// or a comparison with a string literal. With no status function in it the
// condition is success() && (…), as GitHub reads it.
func (r *ghRun) cond(expr string) (bool, error) {
	expr = strings.TrimSpace(expr)
	if m := ghExpr.FindStringSubmatch(expr); m != nil && m[0] == expr {
		expr = m[1]
	}
	if expr == "" {
		return !r.failed, nil
	}
	if strings.Contains(expr, "||") || strings.Contains(expr, "!(") {
		return false, fmt.Errorf("if %q: not modelled", expr)
	}
	ok, status := true, false
	for _, term := range strings.Split(expr, "&&") {
		term = strings.TrimSpace(term)
		switch term {
		case "always()":
			status = true
		case "success()":
			status, ok = true, ok && !r.failed
		case "failure()":
			status, ok = true, ok && r.failed
		case "cancelled()":
			status, ok = true, false
		default:
			m := ghCompare.FindStringSubmatch(term)
			if m == nil {
				return false, fmt.Errorf("if %q: term %q not modelled", expr, term)
			}
			v, err := r.value(m[1])
			if err != nil {
				return false, fmt.Errorf("if %q: %w", expr, err)
			}
			ok = ok && ((v == m[3]) == (m[2] == "=="))
		}
	}
	if !status {
		ok = ok && !r.failed
	}
	return ok, nil
}

// loadGitHub reads the example strictly.
func loadGitHub(t *testing.T, root string) ghWorkflow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "examples", "ci", "github-actions.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf ghWorkflow
	if err := yaml.UnmarshalWithOptions(data, &wf, yaml.Strict()); err != nil {
		t.Fatalf("examples/ci/github-actions.yml: a key this model does not know (teach the test what it means): %v", err)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("examples/ci/github-actions.yml: %d jobs, the test models one", len(wf.Jobs))
	}
	return wf
}

// runGitHub runs the workflow's job for event as a GitHub runner would.
func (m *machine) runGitHub(t *testing.T, wf ghWorkflow, event, runID string) *ghRun {
	t.Helper()
	var job ghJob
	for _, j := range wf.Jobs {
		job = j
	}
	shell, err := ghShell(job.Defaults.Run.Shell)
	if err != nil {
		t.Fatal(err)
	}
	r := &ghRun{event: event, runID: runID, env: map[string]string{}, outcomes: map[string]string{}, outputs: map[string]string{}}
	for k, v := range wf.Env {
		r.env[k] = v
	}
	r.summary = filepath.Join(m.tmp, "summary-"+runID+".md")
	if err := os.WriteFile(r.summary, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobBound)
	defer cancel()
	for i, s := range job.Steps {
		name := s.Name
		if name == "" {
			name = s.Uses
		}
		if name == "" {
			t.Fatalf("step %d has neither name nor uses", i)
		}
		if _, dup := r.outcomes[name]; dup {
			name = fmt.Sprintf("%s#%d", name, i)
		}
		run, err := r.cond(s.If)
		if err != nil {
			t.Fatalf("step %q: %v", name, err)
		}
		if !run {
			r.outcomes[name] = "skipped"
			continue
		}
		with := map[string]string{}
		for k, v := range s.With {
			if with[k], err = r.expand(v); err != nil {
				t.Fatalf("step %q: with %s: %v", name, k, err)
			}
		}
		var errStep error
		switch {
		case s.Run != "" && s.Uses != "":
			t.Fatalf("step %q has both run and uses", name)
		case s.Run != "":
			script, err := r.expand(s.Run)
			if err != nil {
				t.Fatalf("step %q: %v", name, err)
			}
			env := []string{"GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + m.ws, "GITHUB_STEP_SUMMARY=" + r.summary,
				"GITHUB_EVENT_NAME=" + event, "GITHUB_RUN_ID=" + runID, "RUNNER_TEMP=" + m.tmp}
			for k, v := range r.env {
				env = append(env, k+"="+v)
			}
			for k, v := range s.Env {
				v, err := r.expand(v)
				if err != nil {
					t.Fatalf("step %q: env %s: %v", name, k, err)
				}
				env = append(env, k+"="+v)
			}
			code, out := m.shellStep(ctx, shell, script, env, name)
			r.outputs[name] = out
			if code != 0 {
				errStep = fmt.Errorf("exit %d\n%s", code, tail(out, 30))
			}
		default:
			errStep = m.ghAction(t, s.Uses, with)
		}
		if errStep != nil {
			t.Logf("step %q failed: %v", name, errStep)
			r.outcomes[name] = "failure"
			r.failed = true
			continue
		}
		r.outcomes[name] = "success"
	}
	return r
}

// ghAction does what each action the example uses does, as far as this
// machine can: checkouts clone (the public URL rewritten to the local
// stand-in), caches copy, uploads check that what they would upload is there
// and is what the receiving side parses.
func (m *machine) ghAction(t *testing.T, uses string, with map[string]string) error {
	t.Helper()
	allow := func(keys ...string) error {
		for k := range with {
			if !contains(keys, k) {
				return fmt.Errorf("%s: input %q not modelled", uses, k)
			}
		}
		return nil
	}
	action, _, _ := strings.Cut(uses, "@")
	switch action {
	case "actions/checkout":
		if err := allow("repository", "ref", "path"); err != nil {
			return err
		}
		if with["repository"] == "" {
			// The repository the workflow lives in: the workspace the
			// test made.
			_, err := os.Stat(filepath.Join(m.ws, "targets"))
			return err
		}
		args := []string{"clone", "--quiet", "--depth", "1"}
		if ref := with["ref"]; ref != "" {
			args = append(args, "--branch", ref)
		}
		dest := filepath.Join(m.ws, with["path"])
		args = append(args, "https://github.com/"+with["repository"]+".git", dest)
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = m.ws, m.baseEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	case "actions/setup-go":
		if err := allow("go-version-file"); err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(m.ws, with["go-version-file"]))
		if err != nil {
			return err
		}
		want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
		if want == nil {
			return fmt.Errorf("%s: no go directive", with["go-version-file"])
		}
		have, err := exec.Command("go", "env", "GOVERSION").Output()
		if err != nil {
			return fmt.Errorf("go env GOVERSION: %w", err)
		}
		// setup-go would download the version the file names; this
		// machine has none to download, so its own Go must do.
		if version.Compare(strings.TrimSpace(string(have)), "go"+string(want[1])) < 0 {
			return fmt.Errorf("%s asks for go %s; this machine has %s", with["go-version-file"], want[1], have)
		}
		return nil
	case "actions/cache/restore":
		if err := allow("path", "key", "restore-keys"); err != nil {
			return err
		}
		m.restoreCache(with["key"], strings.Split(with["restore-keys"], "\n"))
		return nil
	case "actions/cache/save":
		if err := allow("path", "key"); err != nil {
			return err
		}
		m.saveCache(with["key"], strings.Split(with["path"], "\n"), false)
		return nil
	case "github/codeql-action/upload-sarif":
		if err := allow("sarif_file", "category"); err != nil {
			return err
		}
		return checkSARIF(filepath.Join(m.ws, with["sarif_file"]), with["category"])
	case "mikepenz/action-junit-report":
		if err := allow("report_paths", "check_name"); err != nil {
			return err
		}
		return checkJUnit(filepath.Join(m.ws, with["report_paths"]))
	case "actions/upload-artifact":
		if err := allow("name", "path"); err != nil {
			return err
		}
		if with["name"] == "" {
			return fmt.Errorf("upload-artifact: no name")
		}
		return checkNonEmptyDir(filepath.Join(m.ws, with["path"]))
	}
	return fmt.Errorf("action %s: not modelled", uses)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// checkSARIF reads a SARIF log as code scanning would take it: version
// 2.1.0, at least one run from a named tool, and (with a category) each
// run's automationDetails.id under that category.
func checkSARIF(path, category string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name string `json:"name"`
				} `json:"driver"`
			} `json:"tool"`
			AutomationDetails struct {
				ID string `json:"id"`
			} `json:"automationDetails"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &log); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if log.Version != "2.1.0" || len(log.Runs) == 0 {
		return fmt.Errorf("%s: version %q with %d runs", path, log.Version, len(log.Runs))
	}
	for _, r := range log.Runs {
		if r.Tool.Driver.Name == "" {
			return fmt.Errorf("%s: a run without a tool name", path)
		}
		if category != "" && !strings.HasPrefix(r.AutomationDetails.ID, category+"/") {
			return fmt.Errorf("%s: automationDetails.id %q is not under the category %q", path, r.AutomationDetails.ID, category)
		}
	}
	return nil
}

// checkJUnit reads a JUnit file and counts its test cases: at least one.
func checkJUnit(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	cases, root := 0, ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "testcase" {
				cases++
			}
		}
	}
	if (root != "testsuites" && root != "testsuite") || cases == 0 {
		return fmt.Errorf("%s: root <%s> with %d test cases", path, root, cases)
	}
	return nil
}

// checkNonEmptyDir fails unless dir holds at least one regular file.
func checkNonEmptyDir(dir string) error {
	found := false
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			found = true
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%s: nothing to upload", dir)
	}
	return err
}
