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

// A user policy cannot replace the profiles (what each profile must block
// is part of the release criteria): a profiles.rego of its own is refused,
// naming its file and line, before anything compiles.
func TestUserProfilesAreRefused(t *testing.T) {
	dir := t.TempDir()
	src, err := regoFS.ReadFile("rego/profiles.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "profiles.rego"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(WithPolicies(dir))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "profiles.rego")+":") || !strings.Contains(err.Error(), "package sandcheck.profiles is reserved") {
		t.Fatalf("New = %v, want a refusal naming %s and its line", err, filepath.Join(dir, "profiles.rego"))
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
