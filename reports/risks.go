package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// Risk is one residual risk the target's runtime and platform leave even
// when every criterion holds, as the threat model asks an audit to record:
// why this target carries it, which of its profile's workload restrictions
// and which waivers accept it, and who owns it.
type Risk struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Exposure says why this target carries the risk, from the record.
	Exposure string `json:"exposure"`
	// Restrictions are the profile's and the target's limits that bound it.
	Restrictions []string `json:"restrictions,omitempty"`
	// Waivers are the waivers (file:line) whose criterion covers the risk.
	Waivers []string `json:"waivers,omitempty"`
	// Accepted: the profile admits the risk (or a waiver accepts it); false
	// means the risk needs a decision (a stricter runtime, a waiver with an
	// owner, or a contract).
	Accepted bool `json:"accepted"`
	// Open says why a risk is not accepted when a restriction that would
	// accept it did not hold in this run (its criterion failed): a register
	// never calls a risk accepted on a control the verdict says is broken.
	Open  string `json:"open,omitempty"`
	Owner string `json:"owner"`
	// Criterion is the release criterion that grades the controls around it.
	Criterion string `json:"criterion"`
}

// Isolation classes of a runtime, as policies/rego/profiles.rego names them.
const (
	classSharedKernel = "shared-kernel"
	classUserKernel   = "user-space-kernel"
	classMicroVM      = "microvm"
	classVM           = "vm"
)

// runtimeClass is the isolation class of the record's runner and runtime
// ("" when unknown). The bare-process control and bubblewrap share the
// host kernel like runc.
func runtimeClass(runner, runtime string) string {
	switch runtime {
	case "runc", "crun", "youki":
		return classSharedKernel
	case "runsc":
		return classUserKernel
	case "kata", "kata-runtime", "kata-qemu", "kata-fc", "firecracker":
		return classMicroVM
	case "vm":
		return classVM
	}
	switch runner {
	case "process", "bwrap":
		return classSharedKernel
	}
	return ""
}

// profileRestrictions are the workload restrictions of the design guide's
// profiles that bear on residual risk: their network and the isolation
// classes they admit (wording only: profiles.rego grades).
var profileRestrictions = map[string]struct {
	network string
	classes []string
}{
	"no-network-transform":   {"none", nil},
	"package-build":          {"allowlist: package mirror", nil},
	"brokered-data-task":     {"allowlist: tool broker", nil},
	"mediated-browser":       {"allowlist: browser proxy", nil},
	"high-risk-code":         {"none", []string{classUserKernel, classMicroVM, classVM}},
	"human-approved-publish": {"allowlist", nil},
}

// localRunners start sandboxes on this machine; any other runner is a
// remote platform whose operator can reach the sandboxes.
var localRunners = []string{"docker", "bwrap", "process", ""}

// Risks returns the residual-risk register of a run: shared-kernel (or
// user-space-kernel, or hypervisor) exposure from its runtime,
// management-plane compromise from its runner, vendor administrator access
// for remote platforms, controls the runner could not test, and each
// applied waiver.
func Risks(rec *evidence.Record) []Risk {
	if rec == nil {
		return nil
	}
	prof, known := profileRestrictions[rec.Target.Profile]
	class := runtimeClass(rec.Runner, rec.Runtime)
	waivers := func(criterion string) []string {
		var out []string
		if rec.Verdict != nil {
			for _, w := range rec.Verdict.Waivers {
				if w.Criterion == criterion || w.Criterion == "" {
					out = append(out, plain(w.ID)+" (owner "+plain(w.Owner)+", expires "+plain(w.Expires)+")")
				}
			}
		}
		return out
	}
	var rs []Risk
	restr := []string{}
	var network []string // the profile's network, where it held
	var broken []string  // restrictions of the profile that did not hold
	if known {
		if held, status := criterionHeld(rec, "default-deny-egress"); held {
			network = []string{fmt.Sprintf("profile %s: network %s", rec.Target.Profile, prof.network)}
			restr = append(restr, network...)
		} else {
			broken = append(broken, fmt.Sprintf("the profile's network (%s) did not hold: default-deny-egress is %s", prof.network, status))
		}
	} else {
		restr = append(restr, fmt.Sprintf("profile %q is not one of the design guide's", plain(rec.Target.Profile)))
	}
	restr = append(restr, hardeningFacts(rec)...)

	kernel := Risk{ID: "shared-kernel-exposure", Criterion: "hardened-runtime", Owner: "platform runtime owner",
		Restrictions: restr, Waivers: waivers("hardened-runtime")}
	surface := ""
	if t := rec.Tracer; t != nil && len(t.HostSyscalls) > 0 {
		surface = fmt.Sprintf("; the tracer saw %d distinct host syscalls from the sandboxes", len(t.HostSyscalls))
	}
	switch class {
	case classSharedKernel:
		kernel.Title = "Shared-kernel exposure"
		kernel.Exposure = fmt.Sprintf("runtime %s runs every sandbox on the host kernel %s: a kernel bug reachable through an allowed syscall is a host compromise%s",
			plain(orNone(runtimeName(rec))), plain(rec.Host.Kernel), surface)
	case classUserKernel:
		kernel.Title = "Shared-kernel exposure (reduced: user-space kernel)"
		kernel.Exposure = fmt.Sprintf("gVisor's Sentry serves the sandbox's syscalls but itself runs on the host kernel %s; a Sentry escape reaches it%s",
			plain(rec.Host.Kernel), surface)
	case classMicroVM, classVM:
		kernel.ID, kernel.Title = "hypervisor-exposure", "Hypervisor exposure"
		kernel.Exposure = "each sandbox has its own guest kernel; the virtual machine monitor and its device emulation remain shared"
	default:
		kernel.Title = "Kernel exposure (isolation class unknown)"
		kernel.Exposure = fmt.Sprintf("runtime %q has no known isolation class: whether sandboxes share the host kernel is not established", plain(rec.Runtime))
	}
	kernel.Accepted = class != "" && (!known || prof.classes == nil || slices.Contains(prof.classes, class))
	if known && prof.classes != nil {
		kernel.Restrictions = append(kernel.Restrictions, "profile admits only "+strings.Join(prof.classes, ", "))
	}
	kernel.Accepted = kernel.Accepted || len(kernel.Waivers) > 0
	holds(rec, &kernel, broken)
	rs = append(rs, kernel)

	mgmt := Risk{ID: "management-plane-compromise", Title: "Management-plane compromise", Criterion: "no-host-mount",
		Owner: "platform operations", Waivers: waivers("no-host-mount")}
	sockets := engineSockets(rec)
	switch {
	case slices.Contains(localRunners, rec.Runner):
		mgmt.Exposure = fmt.Sprintf("the %s runner's control plane (on this host, as root) starts and controls every sandbox: whoever reaches it controls them all", plain(orNone(rec.Runner)))
	default:
		mgmt.Exposure = fmt.Sprintf("the %s platform's control plane starts and controls every sandbox: a compromise of it, or of the credentials sandcheck used, reaches them all", plain(rec.Runner))
	}
	if len(sockets) > 0 {
		mgmt.Exposure += "; the engine socket is mounted into a sandbox (" + strings.Join(sockets, ", ") + "): that is a finding, not a residual risk"
	} else {
		mgmt.Restrictions = []string{"no sandbox mounts an engine socket (runtime view)"}
	}
	mgmt.Accepted = len(sockets) == 0 || len(mgmt.Waivers) > 0
	holds(rec, &mgmt, nil)
	rs = append(rs, mgmt)

	if !slices.Contains(localRunners, rec.Runner) {
		v := Risk{ID: "vendor-administrator-access", Title: "Vendor administrator access", Criterion: "attributable-policy",
			Owner: "vendor management (contract owner)", Waivers: waivers("attributable-policy"),
			Exposure:     fmt.Sprintf("the %s platform's administrators can reach the sandboxes, their inputs and outputs outside this test", plain(rec.Runner)),
			Restrictions: append([]string{"only data the vendor contract covers may enter these sandboxes"}, network...)}
		v.Accepted = len(v.Waivers) > 0
		holds(rec, &v, broken)
		rs = append(rs, v)
	}

	var untested []string
	for _, r := range rec.Results {
		if effective(rec.Verdict, r) == outcomeNotTested {
			untested = append(untested, plain(r.Probe))
		}
	}
	if len(untested) > 0 {
		rs = append(rs, Risk{ID: "untested-controls", Title: "Controls this runner could not test", Criterion: "",
			Owner: "security lead", Exposure: fmt.Sprintf("%d probe(s) were not tested: %s", len(untested), strings.Join(capList(untested, 20), ", ")),
			Open: "no restriction of this run can accept a control nobody tested: test it on a runner that can, or waive it by name"})
	}
	if rec.Verdict != nil {
		for _, w := range rec.Verdict.Waivers {
			rs = append(rs, Risk{ID: "waiver " + plain(w.ID), Title: "Waived finding", Criterion: plain(w.Criterion),
				Owner: plain(w.Owner), Accepted: true, Waivers: []string{plain(w.ID)},
				Exposure: fmt.Sprintf("%s (criterion %s, probe %s), %d finding(s) excused until %s", plain(w.Reason),
					plain(orNone(w.Criterion)), plain(orNone(w.Probe)), len(w.Waived), plain(w.Expires))})
		}
	}
	return rs
}

// criterionHeld reports whether criterion id passed (or was waived) in the
// run's verdict, and its status otherwise ("not graded" without a verdict).
func criterionHeld(rec *evidence.Record, id string) (bool, string) {
	if rec.Verdict == nil {
		return false, "not graded"
	}
	for _, c := range rec.Verdict.Criteria {
		if c.ID == id {
			return c.Status == evidence.StatusPass || c.Status == evidence.StatusWaived, plain(c.Status)
		}
	}
	return false, "not graded"
}

// holds withdraws a risk's acceptance when its own criterion or one of the
// profile restrictions it rests on (broken) did not hold in this run, and
// says which in Open.
func holds(rec *evidence.Record, r *Risk, broken []string) {
	var why []string
	if r.Criterion != "" {
		if held, status := criterionHeld(rec, r.Criterion); !held {
			why = append(why, fmt.Sprintf("criterion %s is %s in this run", r.Criterion, status))
		}
	}
	why = append(why, broken...)
	if len(why) > 0 {
		r.Accepted = false
		r.Open = strings.Join(why, "; ")
	}
}

func runtimeName(rec *evidence.Record) string {
	if rec.Runtime != "" {
		return rec.Runtime
	}
	return rec.Runner
}

// hardeningFacts are the runtime view's limits that bound kernel exposure,
// as the first sandbox shows them.
func hardeningFacts(rec *evidence.Record) []string {
	for _, s := range rec.Sandboxes {
		v := s.View
		if v == nil {
			continue
		}
		var out []string
		if v.Seccomp != "" {
			out = append(out, "seccomp "+plain(v.Seccomp))
		}
		if len(v.CapAdd) == 0 {
			out = append(out, "no added capabilities")
		} else {
			out = append(out, "added capabilities "+plain(strings.Join(v.CapAdd, ",")))
		}
		if v.NoNewPrivileges {
			out = append(out, "no-new-privileges")
		}
		if v.User != "" && v.User != "0" && !strings.HasPrefix(v.User, "0:") && v.User != "root" {
			out = append(out, "user "+plain(v.User))
		}
		return out
	}
	return nil
}

// engineSockets lists the container-engine sockets mounted into any
// sandbox, as the runtime reports its mounts.
func engineSockets(rec *evidence.Record) []string {
	var out []string
	for _, s := range rec.Sandboxes {
		if s.View == nil {
			continue
		}
		for _, m := range s.View.Mounts {
			if isEngineSocket(m.Source) && !slices.Contains(out, plain(m.Source)) {
				out = append(out, plain(m.Source))
			}
		}
	}
	return out
}

func isEngineSocket(p string) bool {
	for _, s := range []string{"docker.sock", "containerd.sock", "podman.sock", "crio.sock"} {
		if strings.HasSuffix(p, "/"+s) {
			return true
		}
	}
	return false
}

func capList(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(slices.Clone(ss[:n]), fmt.Sprintf("and %d more", len(ss)-n))
}

// RisksJSON writes the residual-risk register (risks.json) for the audit
// trail beside run.json.
type RisksJSON struct{}

var _ Writer = RisksJSON{}

// Format returns "risks".
func (RisksJSON) Format() string { return "risks" }

// Write writes the register of rec as indented JSON.
func (RisksJSON) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing risks: record is nil")
	}
	doc := struct {
		Schema string `json:"schema"`
		RunID  string `json:"run_id"`
		Target string `json:"target"`
		Risks  []Risk `json:"risks"`
	}{"sandcheck.dev/risks/v1", plain(rec.RunID), plain(rec.Target.Name), Risks(rec)}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing risks: %w", err)
	}
	return nil
}
