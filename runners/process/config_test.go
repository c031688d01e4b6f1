package process

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/targets"
)

// The process section is checked here, once, and its problems name file,
// line and field as every target error does.
func TestSectionValidation(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nprofile: no-network-transform\n"
	for _, tc := range []struct{ name, body, want string }{
		{"without section", "runner: process\n", "t.yaml:4:9: $.runner: runner process needs a process: section"},
		{"host network", "runner: process\nprocess:\n  network: host\n", "t.yaml:6:12: $.process.network: \"host\" is not one of [none harness]"},
		{"no network", "runner: process\nprocess:\n  env: {A: b}\n", "$.process.network: is required"},
		{"small memory", "runner: process\nprocess:\n  network: none\n  limits: {memory: 1Mi}\n", "t.yaml:7:20: $.process.limits.memory"},
		{"reserved env", "runner: process\nprocess:\n  network: none\n  env: {SANDCHECK_X: y}\n", "$.process.env.SANDCHECK_X: the SANDCHECK_ prefix is reserved"},
		{"unknown key", "runner: process\nprocess:\n  network: none\n  bogus: 1\n", "t.yaml:7:3: unknown field \"bogus\""},
		{"common problems first", "runner: process\nimage_verify: {}\nprocess:\n  network: host\n", "$.image_verify"},
	} {
		_, err := targets.Parse("t.yaml", []byte(head+tc.body))
		if err == nil || !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

func TestSectionDecodes(t *testing.T) {
	tg, err := targets.Load("../../fixtures/targets/process.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := tg.Section.(*Config)
	if !ok {
		t.Fatalf("Section is %T, want *process.Config", tg.Section)
	}
	if c.Network != "harness" || c.Limits.PidsLimit != 256 || c.Limits.Memory != "256Mi" {
		t.Errorf("decoded %+v", *c)
	}
	if d := tg.Declared(); d.Egress != "" || d.Limits != (targets.DeclaredLimits{}) || d.Env != nil {
		t.Errorf("process declares %+v, want nothing", d)
	}
}

// An alias resolves across the common keys and the section, and a null
// section is no section, as when the whole file was one decode.
func TestSectionAliasesAndNull(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nprofile: no-network-transform\n"
	tg, err := targets.Parse("t.yaml", []byte(head+"description: &d harness\nrunner: process\nprocess:\n  network: *d\n  env: {A: &e b}\ninputs: {path: /in}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := tg.Section.(*Config); c.Network != "harness" || c.Env["A"] != "b" {
		t.Errorf("decoded %+v", *c)
	}
	_, err = targets.Parse("t.yaml", []byte(head+"runner: process\nprocess: ~\n"))
	if err == nil || !strings.Contains(err.Error(), "needs a process: section") {
		t.Errorf("null section: %v", err)
	}
}
