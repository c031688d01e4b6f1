package policies

import (
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

const testProfile = "high-risk-code"

// hostItem turns a catalog host hint ("canary:metadata", "honeyfile") into a
// host-observed evidence item.
func hostItem(hint string, indicates probes.Outcome) evidence.Item {
	source, kind, ok := strings.Cut(hint, ":")
	if !ok {
		source, kind = evidence.SourceCanary, hint
	}
	it := evidence.Item{Source: source, Kind: kind, Summary: "host saw " + string(indicates), Indicates: indicates}
	if source == evidence.SourceTeardown {
		// As the engine writes it: an absence counts only with the marker
		// that makes it mean something (here: no way to plant).
		it.Kind = "teardown." + kind
		it.Data = map[string]string{"precondition": "no-avenue"}
	}
	if source == "netpath" {
		// As the engine writes a path fact (engine/netpath.go): the host's
		// dial from the sandbox's namespace found the path closed.
		it.Source, it.Kind = evidence.SourceRuntime, "netpath-closed"
		it.Data = map[string]string{"path": kind}
	}
	if source == "broker" {
		// As the engine writes the broker's record of the task's token
		// (engine/broker.go claimsData): named by its hash, bound to the
		// run and the task.
		it.Data = map[string]string{"token_sha256": "ab12", "run": "run-test", "task": "t1", "tenant": "a", "resource": "r", "operation": "read",
			"lifetime_s": "15", "budget_s": "15"}
	}
	if strings.HasPrefix(kind, "carryover-") {
		// The check ran in a fresh box the plant's could not reach.
		it.Data = map[string]string{"precondition": "no-avenue"}
	}
	return it
}

// hardenedRecord is what a run against a hardened target records: every
// probe in the catalog blocked, confirmed from the host where it can be.
func hardenedRecord() *evidence.Record {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &evidence.Record{
		Schema:     evidence.Schema,
		RunID:      "run-test",
		StartedAt:  start,
		FinishedAt: start.Add(time.Minute),
		StartedBy:  "ci",
		Tool:       evidence.Tool{Version: "test", PolicyVersion: Version},
		Target:     evidence.Target{Name: "hardened", Path: "hardened.yaml", Digest: testDigest, Profile: testProfile},
		Runner:     "docker",
		Runtime:    "runsc",
		Image:      evidence.Image{Ref: "sandcheck/runner:dev", Digest: testDigest},
		Sandboxes:  []evidence.Sandbox{{ID: "c1", Name: "shared", View: hardenedView(), TeardownChecked: true}},
	}
	for _, s := range probes.Catalog() {
		r := evidence.Result{
			Probe:     s.ID,
			Category:  s.Category,
			Criterion: s.Criterion,
			Severity:  s.Severity,
			Outcome:   s.ExpectedOn("docker", testProfile), // attempts blocked, workloads through
			Expected:  s.ExpectedOn("docker", testProfile),
			Detail:    "stopped",
			Evidence:  []evidence.Item{{Source: evidence.SourceProbe, Kind: "errno", Summary: "EPERM"}},
		}
		for _, h := range s.Host {
			// The host confirms what the profile expects: an attempt
			// blocked, a workload (workload.read-inputs) through.
			r.Evidence = append(r.Evidence, hostItem(h, s.ExpectedOn("docker", testProfile)))
		}
		rec.Results = append(rec.Results, r)
	}
	return rec
}

const testDigest = "sha256:77c953360c3f7eddf5b231a0622a0bf88eeefa5782c513a6c273b0c1ab017a04"

// hardenedView is the runtime's view of a hardened gVisor sandbox.
func hardenedView() *runners.RuntimeView {
	return &runners.RuntimeView{
		Runtime: "runsc", User: "65534:65534", CapDrop: []string{"ALL"}, Seccomp: "default",
		NoNewPrivileges: true, ReadOnlyRootfs: true,
		MaskedPaths: []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"},
		Mounts: []runners.Mount{
			{Type: "bind", Source: "/tmp/run/probe", Destination: "/.sandcheck", ReadOnly: true},
			{Type: "tmpfs", Destination: "/scratch"},
		},
		NetworkMode: "none", PidsLimit: 64, MemoryBytes: 128 << 20, NanoCPUs: 1e9,
		Env: []string{"PATH"}, Image: "sandcheck/runner:dev", ImageDigest: testDigest,
	}
}

// result returns a pointer to the first result of probe id in rec.
func result(rec *evidence.Record, id string) *evidence.Result {
	for i := range rec.Results {
		if rec.Results[i].Probe == id {
			return &rec.Results[i]
		}
	}
	panic("no result for " + id)
}

// firstProbeOf returns the first catalog probe testing criterion.
func firstProbeOf(criterion string) (probes.Spec, bool) {
	for _, s := range probes.Catalog() {
		if s.Criterion == criterion && s.ExpectedOn("docker", testProfile) == probes.Blocked {
			return s, true
		}
	}
	return probes.Spec{}, false
}

// largeRecord has about n results (the catalog repeated) for benchmarks.
func largeRecord(n int) *evidence.Record {
	rec := hardenedRecord()
	base := rec.Results
	for len(rec.Results) < n {
		rec.Results = append(rec.Results, base...)
	}
	rec.Results = rec.Results[:n]
	return rec
}
