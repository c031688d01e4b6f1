package policies

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

func newGrader(t testing.TB, opts ...Option) *Grader {
	t.Helper()
	g, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func grade(t testing.TB, g *Grader, rec *evidence.Record) *evidence.Verdict {
	t.Helper()
	v, err := g.Grade(context.Background(), rec)
	if err != nil {
		t.Fatalf("Grade: %v", err)
	}
	return v
}

func criterion(t testing.TB, v *evidence.Verdict, id string) evidence.Criterion {
	t.Helper()
	for _, c := range v.Criteria {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("verdict has no criterion %q: %+v", id, v.Criteria)
	return evidence.Criterion{}
}

// statuses maps criterion ID to status.
func statuses(v *evidence.Verdict) map[string]string {
	m := map[string]string{}
	for _, c := range v.Criteria {
		m[c.ID] = c.Status
	}
	return m
}

func TestHardenedRecordPasses(t *testing.T) {
	v := grade(t, newGrader(t), hardenedRecord())
	if !v.Pass {
		t.Fatalf("hardened record did not pass: %+v", v.Criteria)
	}
	var ids []string
	for _, c := range v.Criteria {
		ids = append(ids, c.ID)
		want := evidence.StatusPass // the workload probes grade usability
		if c.Status != want {
			t.Errorf("criterion %s is %s, want %s (reasons %q)", c.ID, c.Status, want, c.Reasons)
		}
		if len(c.Reasons) == 0 {
			t.Errorf("criterion %s has no reasons", c.ID)
		}
	}
	if !slices.Equal(ids, probes.Criteria) {
		t.Errorf("criteria %v, want probes.Criteria in order %v", ids, probes.Criteria)
	}
	seccomp := criterion(t, v, "hardened-runtime")
	if !slices.Contains(seccomp.Reasons, "probe privilege.seccomp blocked as expected (confirmed by runtime/seccomp)") {
		t.Errorf("pass reasons do not cite host confirmation: %q", seccomp.Reasons)
	}
}

// Each criterion fails alone when one of its probes escapes, and the others
// keep their hardened status.
func TestOneCriterionViolated(t *testing.T) {
	g := newGrader(t)
	want := statuses(grade(t, g, hardenedRecord()))
	for _, crit := range probes.Criteria {
		spec, ok := firstProbeOf(crit)
		if !ok {
			continue
		}
		t.Run(crit, func(t *testing.T) {
			rec := hardenedRecord()
			r := result(rec, spec.ID)
			r.Outcome = probes.Escaped
			r.Detail = "got through"
			r.Evidence = r.Evidence[:1] // no host view either way
			v := grade(t, g, rec)
			if v.Pass {
				t.Fatalf("verdict passes with %s escaped", spec.ID)
			}
			for id, st := range statuses(v) {
				exp := want[id]
				if id == crit {
					exp = evidence.StatusFail
				}
				if st != exp {
					t.Errorf("criterion %s is %s, want %s", id, st, exp)
				}
			}
			c := criterion(t, v, crit)
			reason := "probe " + spec.ID + " escaped (expected blocked): self-reported: got through"
			if !slices.Equal(c.Reasons, []string{reason}) {
				t.Errorf("reasons %q, want [%q]", c.Reasons, reason)
			}
		})
	}
}

func TestGradeTable(t *testing.T) {
	workload := probes.Spec{ID: "workload.compile", Category: "workload", Criterion: "usability",
		Severity: "info", Expect: map[string]probes.Outcome{"default": probes.Escaped}}
	cat := append(slices.Clone(probes.Catalog()), workload)
	withWorkload := func(rec *evidence.Record, o probes.Outcome) {
		rec.Results = append(rec.Results, evidence.Result{Probe: workload.ID, Category: "workload",
			Criterion: "usability", Severity: "info", Outcome: o, Expected: probes.Escaped, Detail: "cc exited 1"})
	}
	tests := []struct {
		name    string
		catalog []probes.Spec
		edit    func(*evidence.Record)
		pass    bool
		status  map[string]string
		reason  map[string]string // criterion -> a reason it must contain
	}{{
		name: "contradiction fails",
		edit: func(rec *evidence.Record) {
			r := result(rec, "metadata.aws-imdsv1")
			r.Evidence = append(r.Evidence, evidence.Item{Source: evidence.SourceCanary, Kind: "metadata",
				Summary: "GET /latest/meta-data/iam/ with token t1", Indicates: probes.Escaped})
		},
		status: map[string]string{"no-ambient-cloud-identity": evidence.StatusFail},
		reason: map[string]string{"no-ambient-cloud-identity": "probe metadata.aws-imdsv1 reported blocked but canary/metadata shows escaped: GET /latest/meta-data/iam/ with token t1"},
	}, {
		name: "host escape outranks inconclusive",
		edit: func(rec *evidence.Record) {
			r := result(rec, "host.honeyfile")
			r.Outcome = probes.Inconclusive
			r.Evidence = append(r.Evidence, evidence.Item{Source: evidence.SourceTracer, Kind: "open",
				Summary: "opened honeyfile", Indicates: probes.Escaped})
		},
		status: map[string]string{"no-host-mount": evidence.StatusFail},
		reason: map[string]string{"no-host-mount": "probe host.honeyfile escaped (expected blocked): tracer/open shows escaped: opened honeyfile"},
	}, {
		name: "inconclusive is unconfirmed",
		edit: func(rec *evidence.Record) {
			r := result(rec, "syscalls.bpf")
			r.Outcome = probes.Inconclusive
			r.Detail = "timed out"
		},
		status: map[string]string{"hardened-runtime": evidence.StatusUnconfirmed},
		reason: map[string]string{"hardened-runtime": "probe syscalls.bpf was inconclusive: timed out"},
	}, {
		name: "probe-sourced items do not outrank",
		edit: func(rec *evidence.Record) {
			r := result(rec, "syscalls.bpf")
			r.Evidence = append(r.Evidence, evidence.Item{Source: evidence.SourceProbe, Kind: "claim", Indicates: probes.Escaped})
		},
		pass:   true,
		status: map[string]string{"hardened-runtime": evidence.StatusPass},
	}, {
		name: "host-confirmed not applicable is ignored",
		edit: func(rec *evidence.Record) {
			notApplicable(result(rec, "resources.memory"))
		},
		pass:   true,
		status: map[string]string{"bounded-resources": evidence.StatusPass},
		reason: map[string]string{"bounded-resources": "probe resources.memory not applicable: stopped"},
	}, {
		name: "self-reported not applicable is unconfirmed",
		edit: func(rec *evidence.Record) {
			result(rec, "resources.memory").Outcome = probes.NotApplicable
		},
		status: map[string]string{"bounded-resources": evidence.StatusUnconfirmed},
		reason: map[string]string{"bounded-resources": "probe resources.memory reported not-applicable but profile " + testProfile + " expects blocked and no host fact confirms it: self-reported: stopped"},
	}, {
		name: "only not applicable rests on the runtime view",
		edit: func(rec *evidence.Record) {
			notApplicable(result(rec, "resources.memory"))
			notApplicable(result(rec, "resources.fork-bomb"))
		},
		pass:   true,
		status: map[string]string{"bounded-resources": evidence.StatusPass},
	}, {
		name: "only not applicable and no runtime view is not tested",
		edit: func(rec *evidence.Record) {
			// Every bounded-resources result, whatever probes the catalog
			// holds for it now.
			for i := range rec.Results {
				if rec.Results[i].Criterion == "bounded-resources" {
					notApplicable(&rec.Results[i])
				}
			}
			rec.Sandboxes = nil
		},
		status: map[string]string{"bounded-resources": evidence.StatusNotTested,
			"no-host-mount": evidence.StatusUnconfirmed},
		reason: map[string]string{"no-host-mount": "no sandbox in the record carries the runtime's view: no-host-mount rests on the probes' self-reports"},
	}, {
		name: "no results at all proves nothing",
		edit: func(rec *evidence.Record) { rec.Results = nil },
		pass: false,
		status: map[string]string{"hardened-runtime": evidence.StatusPass,
			"attributable-policy": evidence.StatusPass},
	}, {
		name: "no results and no sandboxes is not tested and proves nothing",
		edit: func(rec *evidence.Record) { rec.Results, rec.Sandboxes = nil, nil },
		pass: false,
		status: map[string]string{"no-host-mount": evidence.StatusNotTested,
			"hardened-runtime": evidence.StatusPass}, // the record's runtime class
		reason: map[string]string{"no-host-mount": "no probe results"},
	}, {
		name: "unknown probe fails its claimed criterion",
		edit: func(rec *evidence.Record) {
			rec.Results = append(rec.Results, evidence.Result{Probe: "host.made-up", Category: "host",
				Criterion: "no-host-mount", Outcome: probes.Blocked, Expected: probes.Blocked})
		},
		status: map[string]string{"no-host-mount": evidence.StatusFail},
		reason: map[string]string{"no-host-mount": "probe host.made-up is not in the catalog (the record may be forged)"},
	}, {
		name: "unknown probe and criterion fail record integrity",
		edit: func(rec *evidence.Record) {
			rec.Results = append(rec.Results, evidence.Result{Probe: "x.y", Category: "x",
				Criterion: "made-up", Outcome: probes.Escaped, Expected: probes.Blocked})
		},
		status: map[string]string{"record-integrity": evidence.StatusFail},
		reason: map[string]string{"record-integrity": "probe x.y is not in the catalog (the record may be forged)"},
	}, {
		name: "escape moved to another criterion fails both",
		edit: func(rec *evidence.Record) {
			r := result(rec, "host.engine-socket")
			r.Criterion = "usability"
			r.Outcome = probes.Escaped
		},
		status: map[string]string{"no-host-mount": evidence.StatusFail, "usability": evidence.StatusFail},
		reason: map[string]string{"no-host-mount": `probe host.engine-socket claims criterion "usability" but the catalog says "no-host-mount" (the record may be forged)`},
	}, {
		name:   "wrong category fails",
		edit:   func(rec *evidence.Record) { result(rec, "privilege.root-uid").Category = "workload" },
		status: map[string]string{"hardened-runtime": evidence.StatusFail},
		reason: map[string]string{"hardened-runtime": `probe privilege.root-uid claims category "workload" but the catalog says "privilege" (the record may be forged)`},
	}, {
		name: "forged expectation does not excuse an escape",
		edit: func(rec *evidence.Record) {
			r := result(rec, "privilege.root-uid")
			r.Expected = probes.Escaped
			r.Outcome = probes.Escaped
		},
		status: map[string]string{"hardened-runtime": evidence.StatusFail},
		reason: map[string]string{"hardened-runtime": "probe privilege.root-uid escaped (expected blocked): self-reported: stopped"},
	}, {
		name:   "unknown outcome fails",
		edit:   func(rec *evidence.Record) { result(rec, "syscalls.keyctl").Outcome = "fine" },
		status: map[string]string{"hardened-runtime": evidence.StatusFail},
		reason: map[string]string{"hardened-runtime": `probe syscalls.keyctl reported unknown outcome "fine"`},
	}, {
		name:    "workload that succeeds passes",
		catalog: cat,
		edit:    func(rec *evidence.Record) { withWorkload(rec, probes.Escaped) },
		pass:    true,
		status:  map[string]string{"usability": evidence.StatusPass},
	}, {
		name:    "blocked workload fails usability",
		catalog: cat,
		edit:    func(rec *evidence.Record) { withWorkload(rec, probes.Blocked) },
		status:  map[string]string{"usability": evidence.StatusFail},
		reason:  map[string]string{"usability": "probe workload.compile was blocked but must succeed (expected escaped): self-reported: cc exited 1"},
	}, {
		name:    "workload success disputed by host is unconfirmed",
		catalog: cat,
		edit: func(rec *evidence.Record) {
			withWorkload(rec, probes.Escaped)
			r := &rec.Results[len(rec.Results)-1]
			r.Evidence = []evidence.Item{{Source: evidence.SourceRuntime, Kind: "exit", Summary: "killed", Indicates: probes.Blocked}}
		},
		status: map[string]string{"usability": evidence.StatusUnconfirmed},
		reason: map[string]string{"usability": "probe workload.compile reported escaped but runtime/exit shows blocked: killed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.catalog != nil {
				opts = append(opts, WithCatalog(tt.catalog))
			}
			rec := hardenedRecord()
			tt.edit(rec)
			v := grade(t, newGrader(t, opts...), rec)
			if v.Pass != tt.pass {
				t.Errorf("pass = %v, want %v; criteria %+v", v.Pass, tt.pass, v.Criteria)
			}
			for id, st := range tt.status {
				if c := criterion(t, v, id); c.Status != st {
					t.Errorf("criterion %s is %s, want %s (reasons %q)", id, c.Status, st, c.Reasons)
				}
			}
			for id, reason := range tt.reason {
				if c := criterion(t, v, id); !slices.Contains(c.Reasons, reason) {
					t.Errorf("criterion %s reasons %q lack %q", id, c.Reasons, reason)
				}
			}
		})
	}
}

func TestUnconfirmedNeverPasses(t *testing.T) {
	g := newGrader(t)
	for _, s := range probes.Catalog() {
		if !s.AppliesTo("docker") {
			// Never run on the docker record's sandboxes: not-applicable
			// whatever it would say.
			continue
		}
		rec := hardenedRecord()
		r := result(rec, s.ID)
		r.Outcome = probes.Inconclusive
		if slices.Contains(s.Host, "output:release") || s.Expected(testProfile) == probes.Escaped && len(s.Host) > 0 {
			// The output probes always report inconclusive and the host's
			// view of the release decides; without that view they are
			// inconclusive. A workload the host confirms (inputs read,
			// proved by their content) is confirmed from what the probe
			// proved, which an inconclusive probe has not.
			r.Evidence = r.Evidence[:1]
		}
		v := grade(t, g, rec)
		if v.Pass {
			t.Errorf("verdict passes with %s inconclusive", s.ID)
		}
		if c := criterion(t, v, s.Criterion); c.Status != evidence.StatusUnconfirmed {
			t.Errorf("%s inconclusive: criterion %s is %s, want unconfirmed", s.ID, s.Criterion, c.Status)
		}
	}
}

func TestGradeLeavesRecordAlone(t *testing.T) {
	rec := hardenedRecord()
	forged := &evidence.Verdict{Pass: true}
	rec.Verdict = forged
	result(rec, "syscalls.bpf").Outcome = probes.Escaped
	v := grade(t, newGrader(t), rec)
	if v.Pass {
		t.Fatal("a verdict already in the record influenced grading")
	}
	if rec.Verdict != forged {
		t.Fatal("Grade replaced the record's verdict")
	}
}

func TestGradeErrors(t *testing.T) {
	g := newGrader(t)
	if _, err := g.Grade(context.Background(), nil); err == nil {
		t.Error("nil record graded")
	}
	rec := hardenedRecord()
	rec.Schema = "other/v9"
	_, err := g.Grade(context.Background(), rec)
	if err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("wrong schema: err = %v, want a schema error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Grade(ctx, hardenedRecord()); err == nil {
		t.Error("graded with a cancelled context")
	}
}

func TestVersion(t *testing.T) {
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(Version) {
		t.Errorf("Version = %q", Version)
	}
	if Version != digest(builtinModules()) {
		t.Error("Version is not stable")
	}
}

func BenchmarkGrade(b *testing.B) {
	g := newGrader(b)
	rec := largeRecord(150)
	rec.Results[3].Outcome = probes.Escaped
	rec.Results[40].Outcome = probes.Inconclusive
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Grade(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// notApplicable makes r a not-applicable result that a host fact confirms
// (as the kernel's syscall table does for a syscall it lacks).
func notApplicable(r *evidence.Result) {
	r.Outcome = probes.NotApplicable
	r.Evidence = append(r.Evidence, evidence.Item{Source: evidence.SourceKernel, Kind: "kernel-syscall-table",
		Summary: "absent", Indicates: probes.NotApplicable})
}
