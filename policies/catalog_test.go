package policies

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// Every pattern of the embedded profiles names at least one probe of the
// catalog: each profile's usability requirement has a workload to run.
func TestEmbeddedProfilesNameOnlyRealProbes(t *testing.T) {
	if _, err := New(); err != nil {
		t.Fatalf("the embedded policy does not load against the catalog: %v", err)
	}
}

// A catalog without a profile's workload probes (the catalog before they
// existed) makes the profile's pattern dead: a load error naming the
// profile and the pattern, not an empty requirement.
func TestProfilePatternMatchingNothingIsALoadError(t *testing.T) {
	specs := slices.DeleteFunc(slices.Clone(probes.Catalog()), func(s probes.Spec) bool {
		return strings.HasPrefix(s.ID, "workload.build-")
	})
	_, err := New(WithCatalog(specs))
	if !errors.Is(err, ErrDeadPattern) {
		t.Fatalf("New = %v, want ErrDeadPattern", err)
	}
	if want := `profile package-build: must_succeed pattern "workload.build-*"`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

// A user policy replacing the profiles is held to the same rule, for
// must_block as for must_succeed.
func TestUserProfilesWithDeadPatternFailToLoad(t *testing.T) {
	dir := t.TempDir()
	src, err := regoFS.ReadFile("rego/profiles.rego")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), `"egress.*",`+"\n]", `"egress.*", "egress.typo-*",`+"\n]", 1)
	if bad == string(src) {
		t.Fatal("the embedded profiles.rego no longer ends its contained list as this test expects")
	}
	if err := os.WriteFile(filepath.Join(dir, "profiles.rego"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(WithPolicies(dir))
	if !errors.Is(err, ErrDeadPattern) || !strings.Contains(err.Error(), `must_block pattern "egress.typo-*"`) {
		t.Fatalf("New = %v, want ErrDeadPattern naming egress.typo-*", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "profiles.rego")) {
		t.Errorf("error %q does not name the user's file", err)
	}
}

// A user's profiles that take their lists from another package are checked
// with the whole policy: the dead pattern in the other package is found.
func TestUserProfilesFromAnotherPackageAreChecked(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"lists.rego": "package acme.lists\n\nimport rego.v1\n\nbuild := [\"workload.build-*\", \"workload.compile-*\"]\n",
		"profiles.rego": `package sandcheck.profiles

import rego.v1

import data.acme.lists

runtime_classes := {"runc": "shared-kernel"}

profiles := {"package-build": {
	"summary": "s", "network": "allowlist", "allowed_destinations": ["package-mirror"],
	"runtime_classes": ["shared-kernel"], "must_block": ["egress.*"], "must_succeed": lists.build,
}}
`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := New(WithPolicies(dir))
	if !errors.Is(err, ErrDeadPattern) || !strings.Contains(err.Error(), `must_succeed pattern "workload.compile-*"`) {
		t.Fatalf("New = %v, want ErrDeadPattern naming workload.compile-*", err)
	}
	if strings.Contains(err.Error(), "workload.build-*") {
		t.Errorf("a live pattern was reported dead: %v", err)
	}
}

// The embedded profiles are checked on their own (they refer to no other
// package), a user's that import one are not.
func TestSelfContained(t *testing.T) {
	src, err := regoFS.ReadFile("rego/profiles.rego")
	if err != nil {
		t.Fatal(err)
	}
	if !selfContained(module{file: "profiles.rego", src: string(src)}) {
		t.Error("the embedded profiles.rego is not self-contained")
	}
	for _, src := range []string{
		"package sandcheck.profiles\n\nimport data.acme.lists\n\nx := lists.a\n",
		"package sandcheck.profiles\n\nx := data.acme.a\n",
		"package sandcheck.profiles\n\nx := \n",
	} {
		if selfContained(module{file: "p.rego", src: src}) {
			t.Errorf("%q counted as self-contained", src)
		}
	}
}
