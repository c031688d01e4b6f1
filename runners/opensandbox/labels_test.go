package opensandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// The harness's names become label values the same way every time, valid
// by upstream's rules (server services/validators.py 91-94) and distinct
// for distinct names.
func TestAsLabelValue(t *testing.T) {
	long := "sandcheck-20261204T211400-abcd-" + strings.Repeat("resources.fork-bomb", 3)
	for _, s := range []string{"resources.fork-bomb", long, long + "x", "a/b c", "-x-", "__", strings.Repeat("é", 40)} {
		v := asLabelValue(s)
		if !labelValueValid(v) || asLabelValue(s) != v {
			t.Errorf("asLabelValue(%q) = %q: not a stable valid label value", s, v)
		}
	}
	if asLabelValue("resources.fork-bomb") != "resources.fork-bomb" {
		t.Error("a valid value was changed")
	}
	if asLabelValue(long) == asLabelValue(long+"x") {
		t.Error("two long names give one value")
	}
}

// TestTargetMetadataChecked: a target whose metadata upstream would refuse
// (a value over 63 characters, a reserved or malformed key) is refused
// when the runner is built, naming the key, not at the first create.
func TestTargetMetadataChecked(t *testing.T) {
	for md, want := range map[string]string{
		"team=" + strings.Repeat("x", 64): `value "xxx`,
		"opensandbox.io/id=x":             "reserved",
		"Bad_Prefix/k=v":                  `key "Bad_Prefix/k"`,
		"k=ends-with-dash-":               "not a Kubernetes label value",
	} {
		k, v, _ := strings.Cut(md, "=")
		_, err := New(targets.OpenSandbox{URL: "http://127.0.0.1:1/v1", Metadata: map[string]string{k: v}}, testImage, "", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("metadata %s: %v, want an error saying %s", md, err, want)
		}
	}
	if probs := CheckMetadata(map[string]string{"team": "platform", "example.com/owner": "a.b_c-9"}); len(probs) > 0 {
		t.Errorf("valid metadata refused: %v", probs)
	}
}

// TestNoNullTimeout: without a lifetime the create omits "timeout" (null is
// what Kubernetes providers may refuse, server api/schema.py 413-421).
func TestNoNullTimeout(t *testing.T) {
	r, err := New(targets.OpenSandbox{URL: "http://127.0.0.1:1/v1"}, testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.request(runners.SandboxSpec{Name: "n"}))
	if strings.Contains(string(b), `"timeout"`) {
		t.Errorf("create request %s carries timeout", b)
	}
	r.cfg.Timeout = 600
	b, _ = json.Marshal(r.request(runners.SandboxSpec{Name: "n"}))
	if !strings.Contains(string(b), `"timeout":600`) {
		t.Errorf("create request %s lacks timeout 600", b)
	}
}

// TestLongNamesStart: a run's sandbox name and task labels past 63
// characters, or holding characters a label may not (what the engine makes
// of long probe ids and target names), still start on a server holding
// metadata to label rules, and the sandbox is found by its name.
func TestLongNamesStart(t *testing.T) {
	_, url := startServer(t, fixture.Config{})
	name := "sandcheck-20261204T211400-abcd-" + strings.Repeat("persistence.scratch-not-empty", 2)
	labels := map[string]string{"sandcheck.task": strings.Repeat("persistence.scratch-not-empty", 3), "sandcheck.target": "my target/x"}
	r, err := New(testCfg(url), testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: name, Labels: labels, ProbeDir: probeDir(t), StartTimeout: time.Minute})
	if err != nil {
		t.Fatalf("start with long names: %v", err)
	}
	defer sb.Close(context.Background())
	ids, err := r.api.listByMetadata(context.Background(), nameKey, asLabelValue(name))
	if err != nil || len(ids) != 1 || ids[0] != sb.ID() {
		t.Errorf("sandboxes named %q: %v %v, want [%s]", name, ids, err, sb.ID())
	}
}
