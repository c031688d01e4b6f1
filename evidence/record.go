// Package evidence holds the run record: everything a run observed, streamed
// as JSON lines while the run goes and written whole as run.json at the end.
// The grader reads only this record; reports read the record and its verdict.
package evidence

import (
	"time"

	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// Schema identifies the run record format.
const Schema = "sandcheck.dev/run/v1"

// Sources of evidence. Only SourceProbe is written by code inside the sandbox;
// the others are host-observed and outrank it.
const (
	SourceProbe    = "probe"
	SourceCanary   = "canary"
	SourceRuntime  = "runtime"
	SourceTracer   = "tracer"
	SourceTeardown = "teardown"
	// SourceOutput is the host's view of the output release path (what the
	// output gate read and released).
	SourceOutput = "output"
	// SourceInputs is the host's check of the inputs folder it planted
	// (what a task proved it read, whether the folder changed).
	SourceInputs = "inputs"
	// SourceKernel is the running host kernel's own tables (its syscall
	// table in /proc/kallsyms), read by the harness.
	SourceKernel = "kernel"
)

// Record is one run.
type Record struct {
	Schema     string    `json:"schema"`
	RunID      string    `json:"run_id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	StartedBy  string    `json:"started_by"`
	Tool       Tool      `json:"tool"`
	Target     Target    `json:"target"`
	Runner     string    `json:"runner"`
	Runtime    string    `json:"runtime"`
	Image      Image     `json:"image"`
	Host       Host      `json:"host"`
	Sandboxes  []Sandbox `json:"sandboxes"`
	Results    []Result  `json:"results"`
	Errors     []string  `json:"errors,omitempty"`
	// Tracer is the eBPF tracer's view of the run (nil for records from
	// before it existed).
	Tracer *Tracer `json:"tracer,omitempty"`
	// NetworkLeftovers is what the host's check found of the harness network
	// after it was removed (empty: nothing survived).
	NetworkLeftovers []string `json:"network_leftovers,omitempty"`
	// Outputs are the passes of the output release path, with every
	// artifact's digest, type and flags.
	Outputs []OutputRelease `json:"outputs,omitempty"`
	Timing  Timing          `json:"timing"`
	Verdict *Verdict        `json:"verdict,omitempty"`
	// Provenance is what the harness verified about the image before any
	// sandbox started (nil: the target asks for no image verification).
	Provenance *Provenance `json:"provenance,omitempty"`
}

// OutputRelease is one pass of the output release path: after the probe run
// that used Token, in sandbox Sandbox.
type OutputRelease struct {
	Token   string          `json:"token"`
	Sandbox string          `json:"sandbox,omitempty"`
	Probes  []string        `json:"probes,omitempty"`
	Release *output.Release `json:"release"`
}

// Tool names the sandcheck build and policy that produced the record.
type Tool struct {
	Version string `json:"version"`
	// PolicyVersion is the embedded release policy's digest.
	PolicyVersion string `json:"policy_version"`
	// UserPolicyVersion is the digest of the user policies (--policy) the
	// run was graded with besides, "" for none.
	UserPolicyVersion string `json:"user_policy_version,omitempty"`
}

// Target describes the target file the run used.
type Target struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Digest  string `json:"digest"` // sha256 of the file's bytes
	Profile string `json:"profile"`
	// Egress is the egress profile the target declares, or the one its
	// network implies (none, mirror-only, broker-only, proxy-only, open).
	Egress string `json:"egress,omitempty"`
	// Inputs is the inputs folder the harness made for the run and bound
	// into every sandbox (nil: the target declares none).
	Inputs *TargetInputs `json:"inputs,omitempty"`
	// Attribution maps run, task and policy to the platform's label that
	// carries each identity, as the target declares it (nil: none
	// declared; the labels must then name sandcheck's run, target and
	// task).
	Attribution map[string]string `json:"attribution,omitempty"`
}

// TargetInputs is the harness's bind of the run's inputs folder: the host
// folder (Source) it filled, where the sandbox sees it (Path) and whether
// it is read-only. The policy does not count that bind, read-only, as a
// host mount.
type TargetInputs struct {
	Path     string `json:"path"`
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only"`
}

// Image is the sandbox image.
type Image struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// Host describes the machine that ran the sandboxes.
type Host struct {
	Kernel        string `json:"kernel"`
	Hostname      string `json:"hostname"`
	CgroupVersion int    `json:"cgroup_version"`
}

// Sandbox is one sandbox the run started.
type Sandbox struct {
	ID           string               `json:"id"`
	Name         string               `json:"name"`
	Probes       []string             `json:"probes"`
	StartSeconds float64              `json:"start_seconds"`
	View         *runners.RuntimeView `json:"runtime_view,omitempty"`
	Teardown     []string             `json:"teardown_leftovers,omitempty"`
	// TeardownChecked is set when the host's teardown check ran after
	// Close (the sandbox is a runners.TeardownVerifier): only then does
	// an empty Teardown mean nothing was left. Without it no check ran,
	// and verified-teardown cannot pass on this sandbox.
	TeardownChecked bool `json:"teardown_checked,omitempty"`
}

// Result is one probe's result with all evidence joined to it.
type Result struct {
	Probe     string `json:"probe"`
	Category  string `json:"category"`
	Criterion string `json:"criterion"`
	Severity  string `json:"severity"`
	// Outcome is what the probe itself reported (self-reported). The grader
	// weighs it against the host-observed items in Evidence.
	Outcome  probes.Outcome `json:"outcome"`
	Expected probes.Outcome `json:"expected"`
	Detail   string         `json:"detail,omitempty"`
	Evidence []Item         `json:"evidence"`
	Sandbox  string         `json:"sandbox,omitempty"`
	Seconds  float64        `json:"seconds"`
}

// Item is one piece of evidence. Indicates says which outcome the item
// supports ("escaped", "blocked" or "" when it only informs).
type Item struct {
	Source    string            `json:"source"`
	Kind      string            `json:"kind"`
	Summary   string            `json:"summary"`
	Indicates probes.Outcome    `json:"indicates,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
}

// Timing holds the run's performance figures.
type Timing struct {
	TotalSeconds        float64 `json:"total_seconds"`
	SandboxStartSeconds float64 `json:"sandbox_start_seconds"`
	ProbeSeconds        float64 `json:"probe_seconds"`
}

// Verdict is the grader's decision.
type Verdict struct {
	Pass     bool          `json:"pass"`
	Criteria []Criterion   `json:"criteria"`
	Results  []ResultGrade `json:"results"`
	// Warnings are advisory findings (warn_* rules, untested criteria,
	// waivers about to expire); they fail a run only with --fail-on-warn.
	Warnings []string `json:"warnings,omitempty"`
	// Waivers are the waivers that excused at least one finding.
	Waivers []WaiverUse `json:"waivers,omitempty"`
	// ExpiredWaivers are waivers for this target past their expiry; they
	// excused nothing.
	ExpiredWaivers []WaiverUse `json:"expired_waivers,omitempty"`
}

// WaiverUse is one waiver as the verdict reports it: the accepted residual
// risk, who owns it, until when, and what it excused.
type WaiverUse struct {
	ID        string   `json:"id"` // file:line
	Criterion string   `json:"criterion"`
	Probe     string   `json:"probe"`
	Target    string   `json:"target"`
	Owner     string   `json:"owner"`
	Reason    string   `json:"reason"`
	Expires   string   `json:"expires"`
	Waived    []string `json:"waived"`
}

// Unconfirmed is the effective outcome the policy gives a result that said
// blocked where no host check confirmed it (no teardown marker, no path
// fact, no broker record): never a probe's own outcome, never a pass.
const Unconfirmed probes.Outcome = "unconfirmed"

// ResultGrade is the policy's reading of one result: the outcome it grades
// by once host evidence is weighed, and the outcome the profile expects.
type ResultGrade struct {
	Probe     string         `json:"probe"`
	Effective probes.Outcome `json:"effective"`
	Expected  probes.Outcome `json:"expected"`
}

// Effective returns the policy's effective outcome for the i-th result, or
// the self-reported one when the verdict has none.
func (r *Record) Effective(i int) probes.Outcome {
	if r.Verdict != nil && i < len(r.Verdict.Results) && r.Verdict.Results[i].Probe == r.Results[i].Probe {
		return r.Verdict.Results[i].Effective
	}
	return r.Results[i].Outcome
}

// Criterion statuses.
const (
	StatusPass        = "pass"
	StatusFail        = "fail"
	StatusUnconfirmed = "unconfirmed"
	StatusNotTested   = "not-tested"
	// StatusWaived: the criterion failed or was unconfirmed, and an
	// unexpired waiver accepts every finding against it.
	StatusWaived = "waived"
)

// Criterion is the grade of one release criterion.
type Criterion struct {
	ID      string   `json:"id"`
	Status  string   `json:"status"`
	Reasons []string `json:"reasons"`
}

// Tracer statuses.
const (
	TracerOn          = "on"
	TracerPartial     = "partial" // some sandboxes ran before the tracer watched them
	TracerUnavailable = "unavailable"
	TracerOff         = "off"
)

// Tracer is what the host kernel's eBPF tracer saw of the run, or why it
// could not look.
type Tracer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Runtime is the sandboxes' runtime, so that surfaces compare per runtime.
	Runtime string `json:"runtime"`
	// HostSyscalls is the host kernel surface: the distinct syscalls the
	// sandboxes' processes (for gVisor, the sentry's) made on the host.
	HostSyscalls []string `json:"host_syscalls"`
	// Sandboxes are the per-sandbox counts.
	Sandboxes []TracedSandbox `json:"sandboxes,omitempty"`
	// Lost counts events, processes and counts the tracer could not record;
	// any loss makes the tracer's view incomplete.
	Lost map[string]uint64 `json:"lost,omitempty"`
}

// TracedSandbox is the tracer's view of one sandbox: watched, with its
// counts, or not watched, and why.
type TracedSandbox struct {
	ID string `json:"id"`
	// Scope is how processes were attributed: pid-namespace,
	// mount-namespace or process-tree ("" when not watched).
	Scope   string `json:"scope"`
	Partial bool   `json:"partial,omitempty"`
	// Unwatched says why the tracer did not watch the sandbox; empty when
	// it did (every sandbox of a record from before the field was).
	Unwatched string `json:"unwatched,omitempty"`
	// Syscalls are the counts by syscall name.
	Syscalls map[string]SyscallCount `json:"syscalls"`
}

// SyscallCount is how often the kernel saw one syscall return, and how.
type SyscallCount struct {
	Calls    uint64 `json:"calls"`
	OK       uint64 `json:"ok"`
	EPERM    uint64 `json:"eperm,omitempty"`
	EACCES   uint64 `json:"eacces,omitempty"`
	ENOSYS   uint64 `json:"enosys,omitempty"`
	OtherErr uint64 `json:"other_errors,omitempty"`
}
