package reports

import (
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

var start = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func baseRecord(name string) *evidence.Record {
	return &evidence.Record{
		Schema:     evidence.Schema,
		RunID:      "run-" + name,
		StartedAt:  start,
		FinishedAt: start.Add(83 * time.Second),
		StartedBy:  "ci",
		Tool:       evidence.Tool{Version: "v0.1.0", PolicyVersion: "sha256:0123abcd"},
		Target:     evidence.Target{Name: name, Path: "targets/" + name + ".yaml", Digest: "sha256:feed", Profile: "high-risk-code"},
		Runner:     "docker",
		Runtime:    "runsc",
		Image:      evidence.Image{Ref: "ghcr.io/sandcheck/runner:1", Digest: "sha256:beef"},
		Host:       evidence.Host{Kernel: "6.1.0-28-amd64", Hostname: "ci-1", CgroupVersion: 2},
		Timing:     evidence.Timing{TotalSeconds: 83.2, SandboxStartSeconds: 4.5, ProbeSeconds: 61.25},
	}
}

func res(id, criterion string, out probes.Outcome, detail string, items ...evidence.Item) evidence.Result {
	cat, _, _ := cut(id)
	return evidence.Result{Probe: id, Category: cat, Criterion: criterion, Severity: "high",
		Outcome: out, Expected: probes.Blocked, Detail: detail, Seconds: 0.25,
		Evidence: append([]evidence.Item{{Source: evidence.SourceProbe, Kind: "errno", Summary: "EPERM"}}, items...)}
}

func cut(id string) (string, string, bool) {
	for i := range id {
		if id[i] == '.' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

func host(source, kind string, ind probes.Outcome, summary string) evidence.Item {
	return evidence.Item{Source: source, Kind: kind, Summary: summary, Indicates: ind}
}

// criteria returns every catalog criterion as not-tested, with overrides.
func criteria(over ...evidence.Criterion) []evidence.Criterion {
	var out []evidence.Criterion
	for _, id := range probes.Criteria {
		c := evidence.Criterion{ID: id, Status: evidence.StatusNotTested, Reasons: []string{"no probe results"}}
		for _, o := range over {
			if o.ID == id {
				c = o
			}
		}
		out = append(out, c)
	}
	return out
}

func hardenedRecord() *evidence.Record {
	rec := baseRecord("hardened")
	rec.Results = []evidence.Result{
		res("metadata.aws-imdsv1", "no-ambient-cloud-identity", probes.Blocked, "connect: network unreachable",
			host(evidence.SourceCanary, "metadata", probes.Blocked, "no request with token t1")),
		res("privilege.seccomp", "hardened-runtime", probes.Blocked, "Seccomp: 2",
			host(evidence.SourceRuntime, "seccomp", probes.Blocked, "seccomp default")),
		res("syscalls.bpf", "hardened-runtime", probes.Blocked, "bpf: EPERM"),
	}
	rec.Verdict = &evidence.Verdict{Pass: true, Criteria: criteria(
		evidence.Criterion{ID: "no-ambient-cloud-identity", Status: evidence.StatusPass,
			Reasons: []string{"probe metadata.aws-imdsv1 blocked as expected (confirmed by canary/metadata)"}},
		evidence.Criterion{ID: "hardened-runtime", Status: evidence.StatusPass, Reasons: []string{
			"probe privilege.seccomp blocked as expected (confirmed by runtime/seccomp)",
			"probe syscalls.bpf blocked as expected"}},
	)}
	return rec
}

func weakRecord() *evidence.Record {
	rec := baseRecord("weak")
	rec.Runtime = "runc"
	// The target file is in testdata, unchanged since the run: SARIF
	// results point at its lines.
	rec.Target.Path = "testdata/targets/weak.yaml"
	rec.Target.Digest = fileDigest("testdata/targets/weak.yaml")
	rec.Results = []evidence.Result{
		res("metadata.aws-imdsv1", "no-ambient-cloud-identity", probes.Blocked, "timeout",
			host(evidence.SourceCanary, "metadata", probes.Escaped, "GET /latest/meta-data/iam/ token t1")),
		res("privilege.root-uid", "hardened-runtime", probes.Escaped, "uid 0"),
		res("syscalls.bpf", "hardened-runtime", probes.Inconclusive, "unexpected errno 14"),
		res("resources.memory", "bounded-resources", probes.NotApplicable, "no cgroup memory controller"),
		res("resources.fork-bomb", "bounded-resources", probes.Blocked, "EAGAIN at 128"),
	}
	rec.Errors = []string{"tracer: attaching kprobe: permission denied"}
	rec.Verdict = &evidence.Verdict{Pass: false, Criteria: criteria(
		evidence.Criterion{ID: "no-ambient-cloud-identity", Status: evidence.StatusFail, Reasons: []string{
			"probe metadata.aws-imdsv1 reported blocked but canary/metadata shows escaped: GET /latest/meta-data/iam/ token t1"}},
		evidence.Criterion{ID: "hardened-runtime", Status: evidence.StatusFail, Reasons: []string{
			"probe privilege.root-uid escaped (expected blocked): self-reported: uid 0",
			"probe syscalls.bpf was inconclusive: unexpected errno 14"}},
		evidence.Criterion{ID: "bounded-resources", Status: evidence.StatusPass, Reasons: []string{
			"probe resources.fork-bomb blocked as expected",
			"probe resources.memory not applicable: no cgroup memory controller"}},
	)}
	return rec
}

// hostileText is what code inside a sandbox might print to break a report.
const hostileText = "x</failure>]]><script>alert(1)</script>|col|\n## head\r\n" +
	"@octocat #1 [link](http://evil.example/) ![i](http://evil.example/i.png) " +
	"**bold** `tick`` \\| <!-- c --> &amp; \x00\x1b[31m\u202egnp.exe\u200b www.evil.example end"

func hostileRecord() *evidence.Record {
	rec := baseRecord("hostile")
	rec.RunID = "run-" + hostileText[:20]
	r := res("host.honeyfile", "no-host-mount", probes.Escaped, hostileText,
		host(evidence.SourceTracer, "open", probes.Escaped, "opened "+hostileText))
	forged := res("host.evil|x", "no-host-mount", probes.Blocked, "`")
	forged.Criterion = "made-up</classname>"
	rec.Results = []evidence.Result{r, forged}
	rec.Verdict = &evidence.Verdict{Pass: false, Criteria: criteria(
		evidence.Criterion{ID: "no-host-mount", Status: evidence.StatusFail, Reasons: []string{
			"probe host.honeyfile escaped (expected blocked): tracer/open shows escaped: opened " + hostileText}},
	)}
	rec.Verdict.Criteria = append(rec.Verdict.Criteria, evidence.Criterion{ID: "record-integrity",
		Status: evidence.StatusFail, Reasons: []string{"probe host.evil|x is not in the catalog (the record may be forged)"}})
	return rec
}

func ungradedRecord() *evidence.Record {
	rec := weakRecord()
	rec.RunID = "run-ungraded"
	rec.Verdict = nil
	return rec
}

// notTestedRecord has a probe the runner could not test and one with an
// outcome this build does not know: both are counted and shown, never
// passed.
func notTestedRecord() *evidence.Record {
	rec := hardenedRecord()
	rec.RunID = "run-not-tested"
	rec.Runner, rec.Runtime = "process", ""
	rec.Results = append(rec.Results,
		res("egress.icmp", "default-deny-egress", outcomeNotTested, "the process runner has no network namespace of its own to test"),
		res("egress.udp", "default-deny-egress", probes.Outcome("half-escaped"), "a future outcome"))
	rec.Verdict.Pass = false
	for i, c := range rec.Verdict.Criteria {
		if c.ID == "default-deny-egress" {
			rec.Verdict.Criteria[i] = evidence.Criterion{ID: c.ID, Status: evidence.StatusUnconfirmed, Reasons: []string{
				"probe egress.udp has an unknown outcome \"half-escaped\"", "probe egress.icmp was not tested: the process runner has no network namespace of its own to test"}}
		}
	}
	return rec
}

var cases = []struct {
	name string
	rec  func() *evidence.Record
}{
	{"hardened", hardenedRecord},
	{"weak", weakRecord},
	{"hostile", hostileRecord},
	{"ungraded", ungradedRecord},
	{"not-tested", notTestedRecord},
}

// fileDigest is a file's digest as a record carries it; a missing file
// gives a digest that matches nothing.
func fileDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "sha256:missing"
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}
