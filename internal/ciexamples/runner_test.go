// Package ciexamples runs the CI examples in examples/ci the way GitHub
// Actions and GitLab CI run them, on this machine: every step in order,
// under the shell and with the defaults each CI system uses, against a
// local copy of this repository standing in for github.com/sandcheck/sandcheck.
//
// Only the parts the examples use are modelled, and strictly: a key, an
// action, an expression or a rule the model does not know fails the test,
// so an edit to an example cannot slip past it unrun.
package ciexamples

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// stepBound bounds one step (a build or a run of the probes) and jobBound a
// whole job; the examples' own timeouts are 30 minutes.
const (
	stepBound = 15 * time.Minute
	jobBound  = 30 * time.Minute
)

// machine is what both CI systems' jobs share on this host: the stand-in
// for github.com/sandcheck/sandcheck, the git configuration that points the
// public URL at it, a sudo for a root shell without one, the cache store and
// the one workspace path every job uses (so that the Go build cache serves
// the second and later builds).
type machine struct {
	t       *testing.T
	root    string // this checkout
	tmp     string
	ws      string // the job's workspace (wiped before each job)
	cache   string // the CI system's cache store: one folder per key
	night1  string // the hardened night's run.json, kept for the GitLab night
	baseEnv []string
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the CI examples end to end (build, setup, probes): not in -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the CI examples run sandcheck as root (sudo): run this test as root, through `make test`")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	m := &machine{t: t, root: root, tmp: tmp, ws: filepath.Join(tmp, "ws"), cache: filepath.Join(tmp, "cache"), night1: filepath.Join(tmp, "night1-run.json")}

	// The public repository, as a bare repository holding this checkout's
	// HEAD as main (the examples' SANDCHECK_REF).
	bare := filepath.Join(tmp, "remote", "sandcheck.git")
	m.must(root, nil, "git", "init", "--quiet", "--bare", bare)
	m.must(root, nil, "git", "push", "--quiet", bare, "HEAD:refs/heads/main")
	gitconfig := filepath.Join(tmp, "gitconfig")
	conf := fmt.Sprintf("[url \"file://%s\"]\n\tinsteadOf = https://github.com/sandcheck/sandcheck.git\n[safe]\n\tdirectory = *\n[advice]\n\tdetachedHead = false\n", bare)
	if err := os.WriteFile(gitconfig, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	path := os.Getenv("PATH")
	if _, err := exec.LookPath("sudo"); err != nil {
		// A CI runner has sudo; this root shell may not. The stand-in
		// takes sudo's -E (keep the environment, which root's shell does
		// anyway) and refuses any other option.
		bin := filepath.Join(tmp, "bin")
		shim := "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  case \"$1\" in\n    -E|--preserve-env) shift ;;\n    --) shift; break ;;\n    -*) echo \"sudo stand-in: unsupported option $1\" >&2; exit 2 ;;\n    *) break ;;\n  esac\ndone\nexec \"$@\"\n"
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
		path = bin + ":" + path
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "CI", k == "SANDCHECK_BIN", k == "GIT_DIR", k == "GIT_WORK_TREE",
			strings.HasPrefix(k, "GITHUB_"), strings.HasPrefix(k, "CI_"), strings.HasPrefix(k, "GIT_CONFIG"):
			continue
		}
		m.baseEnv = append(m.baseEnv, kv)
	}
	m.baseEnv = append(m.baseEnv, "PATH="+path, "CI=true", "GIT_CONFIG_GLOBAL="+gitconfig, "GIT_CONFIG_NOSYSTEM=1")
	return m
}

// must runs a command of the test's own (not a CI step) and fails on error.
func (m *machine) must(dir string, env []string, name string, args ...string) string {
	m.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newWorkspace makes the user's repository afresh at m.ws: the target file
// at targets/platform.yaml, here the hardened reference renamed "platform"
// (the examples' SARIF category), with edit applied to its text.
func (m *machine) newWorkspace(edit func(string) string) {
	m.t.Helper()
	if err := os.RemoveAll(m.ws); err != nil {
		m.t.Fatal(err)
	}
	dir := filepath.Join(m.ws, "targets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(m.root, "fixtures", "targets", "hardened.yaml"))
	if err != nil {
		m.t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^name: .*$`).ReplaceAllString(string(src), "name: platform")
	if edit != nil {
		text = edit(text)
	}
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(text), 0o644); err != nil {
		m.t.Fatal(err)
	}
	prof, err := os.ReadFile(filepath.Join(m.root, "fixtures", "targets", "seccomp-default.json"))
	if err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seccomp-default.json"), prof, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// weaken turns the hardened target into one that fails a criterion it
// passed (no_new_privileges off): a regression against a hardened baseline.
func weaken(text string) string {
	return strings.Replace(text, "no_new_privileges: true", "no_new_privileges: false", 1)
}

// shellStep runs script as a CI step does: written to a file and run by
// argv (the file's path appended), in the workspace, with env. It returns
// the exit code (-1 when the step could not start or ran out of time) and
// the step's output.
func (m *machine) shellStep(ctx context.Context, argv []string, script string, env []string, name string) (int, string) {
	m.t.Helper()
	f, err := os.CreateTemp(m.tmp, "step-*.sh")
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := f.WriteString(script); err != nil {
		m.t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], f.Name())...)
	cmd.Dir = m.ws
	cmd.Env = append(append([]string{}, m.baseEnv...), env...)
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok && ctx.Err() == nil {
			code = ee.ExitCode()
		}
	}
	m.t.Logf("step %q: exit %d in %s", name, code, time.Since(start).Round(time.Second))
	return code, out.String()
}

// tail returns the last n lines of s, for a failure message.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// restoreCache copies the cache entry of key (or, failing that, the newest
// entry whose key starts with one of prefixes, as GitHub's restore-keys and
// GitLab's one key do) into the workspace. It reports whether one was found.
func (m *machine) restoreCache(key string, prefixes []string) bool {
	m.t.Helper()
	dir := filepath.Join(m.cache, key)
	if _, err := os.Stat(dir); err != nil {
		ents, _ := os.ReadDir(m.cache)
		var found []fs.DirEntry
		for _, e := range ents {
			for _, p := range prefixes {
				if p != "" && strings.HasPrefix(e.Name(), p) {
					found = append(found, e)
					break
				}
			}
		}
		if len(found) == 0 {
			return false
		}
		sort.Slice(found, func(i, j int) bool {
			a, _ := found[i].Info()
			b, _ := found[j].Info()
			return a.ModTime().After(b.ModTime())
		})
		dir = filepath.Join(m.cache, found[0].Name())
	}
	m.must(m.ws, nil, "cp", "-a", dir+"/.", m.ws+"/")
	return true
}

// saveCache stores the workspace's paths under key. An existing entry is
// kept as it was unless overwrite is set: GitHub's cache entries are
// immutable, GitLab's cache is replaced by each job that uploads it.
func (m *machine) saveCache(key string, paths []string, overwrite bool) {
	m.t.Helper()
	dir := filepath.Join(m.cache, key)
	if _, err := os.Stat(dir); err == nil {
		if !overwrite {
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			m.t.Fatal(err)
		}
	}
	for _, p := range paths {
		p = strings.TrimSuffix(strings.TrimSpace(p), "/")
		if p == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.ws, p)); err != nil {
			continue // "no files found": a warning, not a failure, and no entry
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			m.t.Fatal(err)
		}
		m.must(m.ws, nil, "cp", "-a", filepath.Join(m.ws, p), filepath.Join(dir, p))
	}
}
