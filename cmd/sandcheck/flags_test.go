package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command's help shows booleans as plain switches, never pflag's
// --name[=true|false].
func TestHelpShowsPlainBooleans(t *testing.T) {
	root := newRoot()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		var b bytes.Buffer
		c.SetOut(&b)
		if err := c.Usage(); err != nil {
			t.Fatalf("%s: %v", c.CommandPath(), err)
		}
		if strings.Contains(b.String(), "[=true|false]") {
			t.Errorf("%s --help shows a boolean as taking a value:\n%s", c.CommandPath(), b.String())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// The vocabulary's new spellings and the old ones give the same result; the
// old ones say they are deprecated.
func TestOldAndNewSpellings(t *testing.T) {
	const runs = "../../policies/testdata/"
	args := []string{runs + "hardened.run.json", runs + "weak.run.json"}
	file := filepath.Join(t.TempDir(), "diff.json")
	for _, tc := range []struct {
		name       string
		flags      []string
		deprecated bool
	}{
		{"new", []string{"-o", "json=" + file}, false},
		{"old", []string{"--format", "json"}, true},
	} {
		root := newRoot()
		var out, errw bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errw)
		root.SetArgs(append(append([]string{"diff"}, tc.flags...), args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := out.String()
		if tc.name == "new" {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("-o json=FILE wrote no file: %v", err)
			}
			if got != "" {
				t.Errorf("-o json=FILE also printed:\n%s", got)
			}
			got = string(b)
		}
		if !strings.Contains(got, `"regressed": true`) {
			t.Errorf("%s spelling: not the JSON diff:\n%s", tc.name, got)
		}
		// cobra prints the deprecation line with Print: to stderr, or
		// (here) to the writer the test set for both.
		if d := strings.Contains(out.String()+errw.String(), "has been deprecated"); d != tc.deprecated {
			t.Errorf("%s spelling: deprecation line %t, want %t (out %q, err %q)", tc.name, d, tc.deprecated, out.String(), errw.String())
		}
	}
}

func TestOutputValues(t *testing.T) {
	o := newOutputs([]string{"json", "sarif", "html"}, "json", "html")
	if got := o.formats(); strings.Join(got, ",") != "json,html" {
		t.Errorf("default formats %v", got)
	}
	for _, v := range []string{"sarif", "json=/tmp/x.json", "html,sarif"} {
		if err := o.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if got := strings.Join(o.formats(), ","); got != "sarif,json,html" {
		t.Errorf("formats %s", got)
	}
	for _, bad := range []string{"pdf", "json=", "sarif,pdf"} {
		if err := newOutputs([]string{"json", "sarif"}).Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
