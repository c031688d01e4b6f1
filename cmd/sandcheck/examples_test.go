package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// testRoot is the command tree as main builds it.
func testRoot() *cobra.Command {
	return newRoot()
}

// shellLines collects the shell commands of a CI file: GitHub's run: and
// GitLab's script:, before_script: and after_script: entries, with
// backslash continuations joined.
func shellLines(node any) []string {
	var out []string
	add := func(s string) {
		s = strings.ReplaceAll(s, "\\\n", " ")
		out = append(out, strings.Split(s, "\n")...)
	}
	switch v := node.(type) {
	case map[string]any:
		for k, c := range v {
			switch {
			case k == "run":
				if s, ok := c.(string); ok {
					add(s)
				}
			case k == "script" || k == "before_script" || k == "after_script":
				if l, ok := c.([]any); ok {
					for _, e := range l {
						if s, ok := e.(string); ok {
							add(s)
						}
					}
				}
			default:
				out = append(out, shellLines(c)...)
			}
		}
	case []any:
		for _, c := range v {
			out = append(out, shellLines(c)...)
		}
	}
	return out
}

// sandcheckCalls finds the sandcheck invocations in a shell line: the
// arguments after a word naming the sandcheck binary, up to a shell
// operator, quotes removed.
func sandcheckCalls(line string) [][]string {
	var calls [][]string
	words := strings.Fields(line)
	for i := 0; i < len(words); i++ {
		if filepath.Base(words[i]) != "sandcheck" || strings.Contains(words[i], "=") {
			continue
		}
		var args []string
		for j := i + 1; j < len(words); j++ {
			w := words[j]
			if strings.ContainsAny(w[:1], "|&;>") || w == "||" || w == "&&" {
				break
			}
			w = strings.TrimRight(w, ";")
			args = append(args, strings.Trim(w, `"'`))
			i = j
		}
		calls = append(calls, args)
	}
	return calls
}

// Every sandcheck command line in examples/ci names a real subcommand with
// flags it has and the arguments it takes; the example target's check runs
// for real on a fixture.
func TestCIExamplesUseRealCommands(t *testing.T) {
	needProbeBinary(t)
	files, _ := filepath.Glob("../../examples/ci/*.yml")
	if len(files) < 2 {
		t.Fatalf("found %d CI examples", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s is not valid YAML: %v", f, err)
		}
		n := 0
		seen := map[string]bool{}
		for _, line := range shellLines(doc) {
			for _, args := range sandcheckCalls(line) {
				n++
				root := testRoot()
				cmd, rest, err := root.Find(args)
				if err != nil || cmd == root {
					t.Errorf("%s: %q names no subcommand (%v)", f, line, err)
					continue
				}
				seen[cmd.CommandPath()] = true
				if err := cmd.ParseFlags(rest); err != nil {
					t.Errorf("%s: %q: %v", f, line, err)
					continue
				}
				if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
					t.Errorf("%s: %q: %v", f, line, err)
				}
				if cmd.Name() == "validate" {
					fixture := []string{"targets", "validate", "--output=json", "../../fixtures/targets/hardened.yaml"}
					if code, out := exitOf(t, testRoot(), fixture...); code != exitPass {
						t.Errorf("%s: the target check fails on a fixture: %s", f, out)
					}
				}
			}
		}
		for _, want := range []string{"sandcheck run", "sandcheck diff", "sandcheck targets validate", "sandcheck doctor"} {
			if !seen[want] {
				t.Errorf("%s does not use %s", f, want)
			}
		}
		t.Logf("%s: %d sandcheck command lines, all parse", f, n)
	}
}
