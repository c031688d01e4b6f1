package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// eachView applies edit to the runtime view of every sandbox in rec.
func eachView(rec *evidence.Record, edit func(*runners.RuntimeView)) {
	for i := range rec.Sandboxes {
		if rec.Sandboxes[i].View != nil {
			edit(rec.Sandboxes[i].View)
		}
	}
}

func TestStoredRuns(t *testing.T) {
	g := newGrader(t)
	for _, tt := range []struct {
		name string
		pass bool
		fail []string
	}{
		{"hardened", true, nil},
		{"hardened-gvisor", true, nil},
		{"weak", false, []string{"no-ambient-cloud-identity", "no-host-mount", "bounded-resources",
			"default-deny-egress", "immutable-approved-base", "isolated-scratch", "controlled-output", "hardened-runtime"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := grade(t, g, loadRun(t, tt.name))
			if v.Pass != tt.pass {
				t.Errorf("pass = %v, want %v", v.Pass, tt.pass)
			}
			for _, c := range v.Criteria {
				want := evidence.StatusPass
				switch {
				case slices.Contains(tt.fail, c.ID):
					want = evidence.StatusFail
				case c.ID == "usability":
					want = evidence.StatusNotTested
				}
				if c.Status != want {
					t.Errorf("criterion %s is %s, want %s (reasons %q)", c.ID, c.Status, want, c.Reasons)
				}
			}
		})
	}
}

// outputProbe and workloadProbe extend the catalog for the criteria the
// catalog has no probe for yet.
var (
	outputProbe = probes.Spec{ID: "output.direct-publish", Category: "output", Criterion: "controlled-output",
		Severity: "high", Expect: map[string]probes.Outcome{"default": probes.Blocked}}
	workloadProbe = probes.Spec{ID: "workload.transform-csv", Category: "workload", Criterion: "usability",
		Severity: "info", Expect: map[string]probes.Outcome{"default": probes.Escaped}}
)

func addResult(rec *evidence.Record, s probes.Spec, o probes.Outcome) {
	rec.Results = append(rec.Results, evidence.Result{Probe: s.ID, Category: s.Category, Criterion: s.Criterion,
		Severity: s.Severity, Outcome: o, Expected: s.ExpectedOn(rec.Runner, rec.Target.Profile), Detail: "d"})
}

// A stored hardened run where each criterion alone is violated fails
// exactly that criterion; every other keeps its hardened status.
func TestEachCriterionAloneViolated(t *testing.T) {
	g := newGrader(t, WithCatalog(append(slices.Clone(probes.Catalog()), outputProbe, workloadProbe)))
	base := func() *evidence.Record {
		rec := loadRun(t, "hardened")
		rec.Tool.PolicyVersion = Version
		addResult(rec, outputProbe, probes.Blocked)
		addResult(rec, workloadProbe, probes.Escaped)
		return rec
	}
	want := statuses(grade(t, g, base()))
	for id, st := range want {
		if st != evidence.StatusPass {
			t.Fatalf("reference: criterion %s is %s, want pass", id, st)
		}
	}
	tests := map[string]func(*evidence.Record){
		"no-ambient-cloud-identity": func(r *evidence.Record) {
			eachView(r, func(v *runners.RuntimeView) { v.Env = append(v.Env, "AWS_SECRET_ACCESS_KEY") })
		},
		"no-host-mount": func(r *evidence.Record) {
			eachView(r, func(v *runners.RuntimeView) {
				v.Mounts = append(v.Mounts, runners.Mount{Type: "bind", Source: "/etc", Destination: "/host-etc", ReadOnly: true})
			})
		},
		"bounded-resources":   func(r *evidence.Record) { eachView(r, func(v *runners.RuntimeView) { v.PidsLimit = 0 }) },
		"default-deny-egress": func(r *evidence.Record) { eachView(r, func(v *runners.RuntimeView) { v.NetworkMode = "bridge" }) },
		"immutable-approved-base": func(r *evidence.Record) {
			eachView(r, func(v *runners.RuntimeView) { v.ImageDigest = "sha256:" + strings.Repeat("0", 64) })
		},
		"isolated-scratch": func(r *evidence.Record) {
			eachView(r, func(v *runners.RuntimeView) {
				v.Mounts = append(v.Mounts, runners.Mount{Type: "volume", Source: "cache", Destination: "/cache"})
			})
		},
		"controlled-output":   func(r *evidence.Record) { result(r, outputProbe.ID).Outcome = probes.Escaped },
		"attributable-policy": func(r *evidence.Record) { r.StartedBy = "" },
		"verified-teardown":   func(r *evidence.Record) { r.Sandboxes[0].Teardown = []string{"container c1"} },
		"hardened-runtime": func(r *evidence.Record) {
			eachView(r, func(v *runners.RuntimeView) { v.CapAdd = []string{"SYS_ADMIN"} })
		},
		"usability": func(r *evidence.Record) { result(r, workloadProbe.ID).Outcome = probes.Blocked },
	}
	if len(tests) != len(probes.Criteria) {
		t.Fatalf("%d cases for %d criteria", len(tests), len(probes.Criteria))
	}
	for crit, edit := range tests {
		t.Run(crit, func(t *testing.T) {
			rec := base()
			edit(rec)
			v := grade(t, g, rec)
			if v.Pass {
				t.Error("verdict passes")
			}
			for id, st := range statuses(v) {
				exp := want[id]
				if id == crit {
					exp = evidence.StatusFail
				}
				if st != exp {
					t.Errorf("criterion %s is %s, want %s (reasons %q)", id, st, exp, criterion(t, v, id).Reasons)
				}
			}
		})
	}
}

func TestProfileRuntimeClass(t *testing.T) {
	g := newGrader(t)
	for _, tt := range []struct {
		run, profile string
		want         string
	}{
		{"hardened", "no-network-transform", evidence.StatusPass},
		{"hardened", "high-risk-code", evidence.StatusFail}, // runc: shared kernel
		{"hardened-gvisor", "high-risk-code", evidence.StatusPass},
	} {
		rec := loadRun(t, tt.run)
		rec.Target.Profile = tt.profile
		c := criterion(t, grade(t, g, rec), "hardened-runtime")
		if c.Status != tt.want {
			t.Errorf("%s as %s: hardened-runtime %s, want %s (%q)", tt.run, tt.profile, c.Status, tt.want, c.Reasons)
		}
		if tt.want == evidence.StatusFail && !slices.Contains(c.Reasons, "runtime runc is shared-kernel isolation; profile high-risk-code accepts only user-space-kernel, microvm, vm") {
			t.Errorf("reasons do not name the runtime class: %q", c.Reasons)
		}
	}
}

func TestWaivers(t *testing.T) {
	ws, err := ParseWaivers("w.yaml", []byte(`schema: sandcheck.dev/waivers/v1
waivers:
  - criterion: hardened-runtime
    target: hardened-reference
    owner: sec@example.com
    reason: pilot
    expires: 2030-06-30
`), AllowCriterionWaivers(true), WaiverClock(func() time.Time { return time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC) }))
	if err != nil {
		t.Fatal(err)
	}
	rec := loadRun(t, "hardened")
	rec.Tool.PolicyVersion = Version
	eachView(rec, func(v *runners.RuntimeView) { v.CapAdd = []string{"NET_RAW"} })
	at := func(day string) *evidence.Verdict {
		now, _ := time.Parse(time.DateOnly, day)
		return grade(t, newGrader(t, WithWaivers(ws), WithClock(func() time.Time { return now })), rec)
	}

	v := at("2030-06-30") // the last day the waiver holds
	c := criterion(t, v, "hardened-runtime")
	if !v.Pass || c.Status != evidence.StatusWaived {
		t.Fatalf("active waiver: pass %v, status %s (%q)", v.Pass, c.Status, c.Reasons)
	}
	if len(v.Waivers) != 1 || v.Waivers[0].ID != "w.yaml:3" || len(v.Waivers[0].Waived) == 0 {
		t.Errorf("applied waivers %+v", v.Waivers)
	}
	if !slices.ContainsFunc(v.Warnings, func(s string) bool {
		return strings.Contains(s, "w.yaml:3") && strings.Contains(s, "expires on 2030-06-30")
	}) {
		t.Errorf("no warning that the waiver expires soon: %q", v.Warnings)
	}

	v = at("2030-07-01") // expired: it stops waiving and says so
	c = criterion(t, v, "hardened-runtime")
	if v.Pass || c.Status != evidence.StatusFail {
		t.Fatalf("expired waiver: pass %v, status %s", v.Pass, c.Status)
	}
	if len(v.Waivers) != 0 || len(v.ExpiredWaivers) != 1 {
		t.Errorf("expired waiver: applied %+v, expired %+v", v.Waivers, v.ExpiredWaivers)
	}
	if !slices.Contains(c.Reasons, "waiver w.yaml:3 (owner sec@example.com) expired on 2030-06-30 and no longer applies") {
		t.Errorf("reasons do not say the waiver expired: %q", c.Reasons)
	}
}

func TestWaiverNeverExcusesContradiction(t *testing.T) {
	ws, err := ParseWaivers("w.yaml", []byte("schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: metadata.*\n    target: hardened-reference\n    owner: o\n    reason: r\n    expires: 2999-01-01\n"), WaiverClock(func() time.Time { return time.Date(2998, 12, 1, 0, 0, 0, 0, time.UTC) }))
	if err != nil {
		t.Fatal(err)
	}
	rec := loadRun(t, "hardened")
	r := result(rec, "metadata.aws-imdsv1")
	r.Evidence = append(r.Evidence, evidence.Item{Source: evidence.SourceCanary, Kind: "metadata-hit", Summary: "token seen", Indicates: probes.Escaped})
	v := grade(t, newGrader(t, WithWaivers(ws)), rec)
	if c := criterion(t, v, "no-ambient-cloud-identity"); v.Pass || c.Status != evidence.StatusFail {
		t.Errorf("a waiver excused a contradiction: %s %q", c.Status, c.Reasons)
	}
}

func TestMalformedInputsNameFileAndLine(t *testing.T) {
	if _, err := LoadWaivers(filepath.Join("..", "fixtures", "waivers", "missing-owner.yaml")); err == nil ||
		!strings.Contains(err.Error(), "missing-owner.yaml:10: waiver 2 has no owner") {
		t.Errorf("missing owner: err = %v", err)
	}
	for name, doc := range map[string]string{
		"no reason":   "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: x.y\n    target: t\n    owner: o\n    expires: 2030-01-01\n",
		"no expiry":   "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: x.y\n    target: t\n    owner: o\n    reason: r\n",
		"bad date":    "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: x.y\n    target: t\n    owner: o\n    reason: r\n    expires: next year\n",
		"unknown key": "schema: sandcheck.dev/waivers/v1\nwaivers:\n  - probe: x.y\n    target: t\n    ownr: o\n",
	} {
		if _, err := ParseWaivers("w.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "w.yaml:") {
			t.Errorf("%s: err = %v, want one naming w.yaml:<line>", name, err)
		}
	}
	for name, src := range map[string]string{
		"parse":  "package sandcheck.user\n\ndeny contains msg if {\n",
		"strict": "package sandcheck.user\n\nimport rego.v1\n\ndeny contains msg if {\n\tx := 1\n\tmsg := \"m\"\n}\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "bad.rego"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := New(WithPolicies(dir)); err == nil || !strings.Contains(err.Error(), "bad.rego:") {
			t.Errorf("%s: err = %v, want one naming bad.rego:<line>", name, err)
		}
	}
}

func TestUserPolicy(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "policies", "team-example")
	g := newGrader(t, WithPolicies(dir))
	if g.Version() != Version || g.UserVersion() == "" {
		t.Errorf("versions %q and %q: want the embedded policy's and the user policy's", g.Version(), g.UserVersion())
	}
	v := grade(t, g, loadRun(t, "hardened")) // started by root
	if c := criterion(t, v, "team-ci-only"); c.Status != evidence.StatusFail {
		t.Errorf("team criterion %s %q", c.Status, c.Reasons)
	}
	res, err := Test(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Fail || r.Error != nil {
			t.Errorf("%s: fail %v err %v", r.Name, r.Fail, r.Error)
		}
	}
}

// Re-grading a stored run gives the verdict the live run wrote.
func TestRegradeIsStable(t *testing.T) {
	g := newGrader(t)
	for _, n := range storedRuns {
		rec := loadRun(t, n)
		rec.Tool.PolicyVersion = g.Version() // as finish() records it
		rec.Verdict = grade(t, g, rec)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := DecodeRecord(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: stored record does not decode: %v", n, err)
		}
		again, _ := json.Marshal(grade(t, g, stored))
		want, _ := json.Marshal(stored.Verdict)
		if !bytes.Equal(again, want) {
			t.Errorf("%s: re-graded verdict differs:\n got %s\nwant %s", n, again, want)
		}
	}
}

// The schema covers every field of the record: a record with every field
// set validates (additionalProperties is false throughout).
func TestSchemaCoversRecord(t *testing.T) {
	rec := hardenedRecord()
	rec.Errors = []string{"e"}
	rec.Sandboxes[0].Teardown = []string{"x"}
	rec.Sandboxes[0].Probes = []string{"syscalls.bpf"}
	rec.Sandboxes[0].View.Unknown = []string{"user"}
	rec.Results[0].Sandbox = "c1"
	rec.Results[0].Evidence[0].Data = map[string]string{"destination": "d"}
	rec.Verdict = grade(t, newGrader(t), rec)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateInput(b); err != nil {
		t.Errorf("full record: %v", err)
	}
	if err := ValidateInput([]byte(`{"schema":"sandcheck.dev/run/v1","surprise":1}`)); err == nil {
		t.Error("a record with an unknown field validates")
	}
}

func BenchmarkGradeStoredRun(b *testing.B) {
	g := newGrader(b)
	ctx := context.Background()
	for _, n := range storedRuns {
		rec := loadRun(b, n)
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Grade(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Every JSON field of evidence.Record (verdict aside) is in the schema, so
// a field added to the record without the schema fails here.
func TestSchemaNamesEveryRecordField(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(RunSchema, &doc); err != nil {
		t.Fatal(err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	var walk func(path string, typ reflect.Type, node map[string]any)
	walk = func(path string, typ reflect.Type, node map[string]any) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
			if items, ok := node["items"].(map[string]any); ok {
				node = items
			} else if ap, ok := node["additionalProperties"].(map[string]any); ok {
				node = ap
			}
		}
		if ref, ok := node["$ref"].(string); ok {
			node, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		props, _ := node["properties"].(map[string]any)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || name == "verdict" {
				continue
			}
			sub, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("schema lacks %s.%s", path, name)
				continue
			}
			walk(path+"."+name, f.Type, sub)
		}
	}
	walk("$", reflect.TypeOf(evidence.Record{}), doc)
}
