package ciexamples

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The parts of a GitLab CI job the example uses; anything else fails the
// strict decoding.
type glJob struct {
	Extends      string       `yaml:"extends"`
	Tags         []string     `yaml:"tags"`
	Timeout      string       `yaml:"timeout"`
	BeforeScript []string     `yaml:"before_script"`
	Script       []string     `yaml:"script"`
	AfterScript  []string     `yaml:"after_script"`
	Rules        []glRule     `yaml:"rules"`
	Cache        *glCache     `yaml:"cache"`
	Artifacts    *glArtifacts `yaml:"artifacts"`
}

type glRule struct {
	If   string `yaml:"if"`
	When string `yaml:"when"`
}

type glCache struct {
	Key   string   `yaml:"key"`
	Paths []string `yaml:"paths"`
	When  string   `yaml:"when"`
}

type glArtifacts struct {
	When     string   `yaml:"when"`
	ExpireIn string   `yaml:"expire_in"`
	ExposeAs string   `yaml:"expose_as"`
	Paths    []string `yaml:"paths"`
	Reports  struct {
		JUnit string `yaml:"junit"`
	} `yaml:"reports"`
}

type glPipeline struct {
	variables map[string]string
	jobs      map[string]glJob // visible jobs, extends resolved
}

// loadGitLab reads the example strictly and resolves extends: the job's
// own keys override its template's, as GitLab merges them (the example's
// jobs and template share no key that GitLab would deep-merge).
func loadGitLab(t *testing.T, root string) glPipeline {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "examples", "ci", "gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		t.Fatalf("examples/ci/gitlab-ci.yml: %v", err)
	}
	p := glPipeline{variables: map[string]string{}, jobs: map[string]glJob{}}
	all := map[string]glJob{}
	for k, v := range top {
		raw, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		switch k {
		case "variables":
			if err := yaml.UnmarshalWithOptions(raw, &p.variables, yaml.Strict()); err != nil {
				t.Fatalf("gitlab-ci.yml: variables: %v", err)
			}
		case "stages", "default", "include", "workflow", "image", "services", "cache", "before_script", "after_script":
			t.Fatalf("gitlab-ci.yml: top-level %q not modelled (teach the test what it means)", k)
		default:
			var j glJob
			if err := yaml.UnmarshalWithOptions(raw, &j, yaml.Strict()); err != nil {
				t.Fatalf("gitlab-ci.yml: job %q: a key this model does not know (teach the test what it means): %v", k, err)
			}
			all[k] = j
		}
	}
	for name, j := range all {
		if strings.HasPrefix(name, ".") {
			continue
		}
		if j.Extends != "" {
			base, ok := all[j.Extends]
			if !ok {
				t.Fatalf("gitlab-ci.yml: job %q extends %q, which does not exist", name, j.Extends)
			}
			if base.Extends != "" {
				t.Fatalf("gitlab-ci.yml: nested extends not modelled (%s)", j.Extends)
			}
			j = mergeJob(base, j)
		}
		p.jobs[name] = j
	}
	return p
}

func mergeJob(base, j glJob) glJob {
	out := base
	out.Extends = ""
	if j.Tags != nil {
		out.Tags = j.Tags
	}
	if j.Timeout != "" {
		out.Timeout = j.Timeout
	}
	if j.BeforeScript != nil {
		out.BeforeScript = j.BeforeScript
	}
	if j.Script != nil {
		out.Script = j.Script
	}
	if j.AfterScript != nil {
		out.AfterScript = j.AfterScript
	}
	if j.Rules != nil {
		out.Rules = j.Rules
	}
	if j.Cache != nil {
		out.Cache = j.Cache
	}
	if j.Artifacts != nil {
		out.Artifacts = j.Artifacts
	}
	return out
}

var glTerm = regexp.MustCompile(`^(\$[A-Z_]+|"[^"]*")\s*(==|!=)\s*(\$[A-Z_]+|"[^"]*")$`)

// ruleMatches evaluates a rules: if of comparisons joined by &&; an unset
// variable is null, equal to nothing but another unset one.
func ruleMatches(expr string, vars map[string]string) (bool, error) {
	if strings.Contains(expr, "||") || strings.Contains(expr, "(") || strings.Contains(expr, "=~") {
		return false, fmt.Errorf("rule %q: not modelled", expr)
	}
	operand := func(s string) (string, bool) {
		if strings.HasPrefix(s, "$") {
			v, ok := vars[s[1:]]
			return v, ok
		}
		return strings.Trim(s, `"`), true
	}
	for _, term := range strings.Split(expr, "&&") {
		m := glTerm.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return false, fmt.Errorf("rule %q: term %q not modelled", expr, term)
		}
		a, aok := operand(m[1])
		b, bok := operand(m[3])
		eq := aok == bok && a == b
		if eq != (m[2] == "==") {
			return false, nil
		}
	}
	return true, nil
}

// glVars are the predefined variables of a pipeline from source on the
// default branch main (a merge request pipeline has no CI_COMMIT_BRANCH).
func glVars(p glPipeline, source string, ws string) map[string]string {
	v := map[string]string{"CI": "true", "GITLAB_CI": "true", "CI_PIPELINE_SOURCE": source,
		"CI_DEFAULT_BRANCH": "main", "CI_PROJECT_DIR": ws}
	if source != "merge_request_event" {
		v["CI_COMMIT_BRANCH"] = "main"
	}
	for k, val := range p.variables {
		v[k] = val
	}
	return v
}

// selected lists the jobs a pipeline from source runs: those whose first
// matching rule does not say never (a job without rules always runs).
func (p glPipeline) selected(t *testing.T, source string) []string {
	t.Helper()
	vars := glVars(p, source, "")
	var out []string
	for name, j := range p.jobs {
		run := len(j.Rules) == 0
		for _, r := range j.Rules {
			ok, err := ruleMatches(r.If, vars)
			if err != nil {
				t.Fatalf("job %q: %v", name, err)
			}
			if ok {
				run = r.When != "never"
				break
			}
		}
		if run {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// glResult is what one job did.
type glResult struct {
	code int
	out  string
}

// runGitLab runs job as GitLab Runner's shell executor with bash does: the
// cache restored, before_script and script as one bash script under `set
// -eo pipefail` (the runner's preamble), the cache saved per its when, and
// the artifacts collected (the junit report parsed as GitLab would).
//
// One difference: the runner starts a login shell, which reads the
// machine's profile; here the test's own PATH (with its Go) is kept.
func (m *machine) runGitLab(t *testing.T, p glPipeline, name, source string) glResult {
	t.Helper()
	j, ok := p.jobs[name]
	if !ok {
		t.Fatalf("no job %q", name)
	}
	vars := glVars(p, source, m.ws)
	if j.Cache != nil {
		m.restoreCache(j.Cache.Key, nil)
	}
	var b strings.Builder
	b.WriteString("set -eo pipefail\nset +o noclobber\n")
	for _, line := range append(append([]string{}, j.BeforeScript...), j.Script...) {
		fmt.Fprintf(&b, "echo %s\n%s\n", shellQuote("$ "+line), line)
	}
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobBound)
	defer cancel()
	code, out := m.shellStep(ctx, []string{"bash", "--noprofile", "--norc"}, b.String(), env, name)
	if len(j.AfterScript) > 0 {
		t.Fatalf("job %q: after_script not modelled", name)
	}
	if c := j.Cache; c != nil && (c.When == "always" || (code == 0 && (c.When == "" || c.When == "on_success")) || (code != 0 && c.When == "on_failure")) {
		m.saveCache(c.Key, c.Paths, true)
	}
	if a := j.Artifacts; a != nil && (a.When == "always" || (code == 0 && a.When != "on_failure") || (code != 0 && a.When == "on_failure")) {
		if a.Reports.JUnit != "" {
			if err := checkJUnit(filepath.Join(m.ws, a.Reports.JUnit)); err != nil {
				t.Errorf("job %q: artifacts:reports:junit: %v", name, err)
			}
		}
	}
	return glResult{code: code, out: out}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
