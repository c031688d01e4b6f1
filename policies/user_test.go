package policies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// forgedRelease is a user release.rego that passes everything; before, a
// module named like the embedded one replaced it and the weak reference
// passed.
const forgedRelease = `package sandcheck.release

import rego.v1

verdict := {"pass": true, "criteria": [{"id": c, "status": "pass", "reasons": ["forged"]} | some c in data.catalog.criteria], "results": [], "warnings": [], "waivers": [], "expired_waivers": []}
`

func TestUserCannotReplaceTheReleasePolicy(t *testing.T) {
	dir := userDir(t, "release.rego", forgedRelease)
	_, err := New(WithPolicies(dir))
	want := filepath.Join(dir, "release.rego") + ":1: package sandcheck.release is reserved"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New = %v, want an error containing %q", err, want)
	}
	// The same file in a policy test is refused too.
	if err := os.WriteFile(filepath.Join(dir, "x_test.rego"), []byte("package sandcheck.x_test\n\nimport rego.v1\n\ntest_x if true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Test(context.Background(), dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Test = %v, want an error containing %q", err, want)
	}
	// A criteria module of the same name in package sandcheck.criteria
	// (overriding a criterion's rules) is refused as well.
	dir = userDir(t, "hostmount.rego", "package sandcheck.criteria\n\nimport rego.v1\n\npass_forged contains \"x\"\n")
	if _, err := New(WithPolicies(dir)); err == nil || !strings.Contains(err.Error(), "hostmount.rego:1: package sandcheck.criteria is reserved") {
		t.Fatalf("New = %v, want a refusal of the criteria package", err)
	}
}

// A user module named like an embedded one (release.rego) is added beside
// it, in its own package: the embedded release policy still grades.
func TestUserModuleNamedLikeEmbeddedAdds(t *testing.T) {
	dir := userDir(t, "release.rego", "package sandcheck.user\n\nimport rego.v1\n\ndeny contains \"team rule\"\n")
	g := newGrader(t, WithPolicies(dir))
	v := grade(t, g, loadRun(t, "hardened"))
	if v.Pass {
		t.Fatal("a user deny did not fail the verdict")
	}
	if c := criterion(t, v, "user-policy"); c.Status != evidence.StatusFail {
		t.Errorf("user-policy %s %q", c.Status, c.Reasons)
	}
	if c := criterion(t, v, "no-host-mount"); c.Status != evidence.StatusPass {
		t.Errorf("the embedded criteria no longer grade: no-host-mount %s", c.Status)
	}
	if v := grade(t, g, loadRun(t, "weak")); v.Pass {
		t.Error("the weak reference passed")
	}
}

func TestUserDataUnderReservedRootsIsRefused(t *testing.T) {
	for _, doc := range []string{
		`{"sandcheck": {"release": {"pass": true}}}`,
		`{"grading": {"waivers": []}}`,
		`{"catalog": {"criteria": []}}`,
	} {
		dir := userDir(t, "data.json", doc)
		if _, err := New(WithPolicies(dir)); err == nil || !strings.Contains(err.Error(), "is reserved for sandcheck") {
			t.Errorf("%s: New = %v, want a refusal", doc, err)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sandcheck", "release"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sandcheck", "release", "data.json"), []byte(`{"pass": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(WithPolicies(dir)); err == nil || !strings.Contains(err.Error(), "data.sandcheck, which is reserved") {
		t.Errorf("nested data file: New = %v, want a refusal", err)
	}
	// Data under another root is the team's.
	newGrader(t, WithPolicies(userDir(t, "data.json", `{"team": {"registry": "sandcheck/"}}`)))
}

// User Rego reaches neither the network nor the host: each of these
// compiled, and ran, before.
func TestUserPolicyHasNoNetworkOrHostBuiltins(t *testing.T) {
	for fn, call := range map[string]string{
		"http.send":            `http.send({"method": "GET", "url": "http://127.0.0.1:9/"})`,
		"net.lookup_ip_addr":   `net.lookup_ip_addr("localhost")`,
		"net.cidr_expand":      `net.cidr_expand("127.0.0.0/8")`,
		"opa.runtime":          `opa.runtime()`,
		"rand.intn":            `rand.intn("x", 10)`,
		"uuid.rfc4122":         `uuid.rfc4122("x")`,
		"json.match_schema":    `json.match_schema({}, {"$ref": "http://127.0.0.1:9/s.json"})`,
		"io.jwt.decode_verify": `io.jwt.decode_verify("a.b.c", {"secret": "s"})`,
	} {
		src := "package sandcheck.user\n\nimport rego.v1\n\ndeny contains msg if {\n\tx := " + call + "\n\tmsg := sprintf(\"%v\", [x])\n}\n"
		dir := userDir(t, "net.rego", src)
		_, err := New(WithPolicies(dir))
		if err == nil || !strings.Contains(err.Error(), "net.rego:6") || !strings.Contains(err.Error(), fn) {
			t.Errorf("%s: New = %v, want a compile error at net.rego:6", fn, err)
		}
	}
}

// The record names the embedded policy and the user policy apart: the
// user digest follows the policy's content, not where it is checked out.
func TestUserPolicyVersion(t *testing.T) {
	src := "package sandcheck.user\n\nimport rego.v1\n\nwarn contains \"w\"\n"
	a := newGrader(t, WithPolicies(userDir(t, "team.rego", src)))
	b := newGrader(t, WithPolicies(userDir(t, "team.rego", src)))
	c := newGrader(t, WithPolicies(userDir(t, "team.rego", src+"\nwarn contains \"v\"\n")))
	d := newGrader(t, WithPolicies(userDir(t, "data.json", `{"team": 1}`)))
	none := newGrader(t)
	if a.UserVersion() == "" || a.UserVersion() != b.UserVersion() {
		t.Errorf("same policy in two folders: %q and %q", a.UserVersion(), b.UserVersion())
	}
	if a.UserVersion() == c.UserVersion() || d.UserVersion() == "" || none.UserVersion() != "" {
		t.Errorf("user versions %q %q %q %q", a.UserVersion(), c.UserVersion(), d.UserVersion(), none.UserVersion())
	}
	var tool evidence.Tool
	a.Stamp(&tool)
	if tool.PolicyVersion != Version || tool.UserPolicyVersion != a.UserVersion() {
		t.Errorf("Stamp wrote %+v", tool)
	}
}
