package e2e

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"

	"github.com/sandcheck/sandcheck/probes"
)

// The external cross-check (issue 4, item 7): Docker's default seccomp profile
// (github.com/moby/profiles/seccomp, the version in go.mod) is a public,
// independent statement of which syscalls a container may make. For every
// syscalls.* probe the test derives from DefaultProfile() whether the profile
// blocks that syscall for a container with no added capabilities on amd64,
// runs the hardened reference (which applies that very profile) through the
// CLI, and asserts that each probe's outcome agrees. A disagreement that has a
// reason outside seccomp (a capability check, a kernel sysctl) must be listed
// in knownDifferences; any other one fails the test with its name.

// knownDifferences are the syscalls whose probe outcome on the hardened
// reference differs from what the default profile alone predicts, each with
// the reason. Keys are syscall names.
var knownDifferences = map[string]string{
	// The profile allows adjtimex to every container, because reading the
	// clock state (modes 0) is harmless. The probe asks for a change (an
	// out-of-range ADJ_TICK), which the kernel refuses with EPERM without
	// CAP_SYS_TIME before it looks at the value: blocked by the capability
	// check, not by seccomp.
	"adjtimex": "profile allows; the kernel's CAP_SYS_TIME check refuses a change (hardened drops all capabilities)",
}

// probeArg0 is the first argument a probe passes, for profile rules that allow
// a syscall only for some argument values (SCMP_CMP_EQ on argument 0).
var probeArg0 = map[string]uint64{
	// sysPersonality asks for READ_IMPLIES_EXEC on top of PER_LINUX (0).
	"personality": 0x0400000,
}

// profileVerdict is what a profile says of one syscall for a container with no
// added capabilities on amd64 on a kernel of at least 5.x: "allowed" or
// "blocked", with the rule that decided it.
func profileVerdict(p *seccomp.Seccomp, name string) (string, string) {
	applies := func(s *seccomp.Syscall) bool {
		if in := s.Includes; in != nil {
			if len(in.Caps) > 0 { // only with a capability the container lacks
				return false
			}
			if len(in.Arches) > 0 && !slices.Contains(in.Arches, "amd64") {
				return false
			}
			if in.MinKernel != nil && in.MinKernel.Kernel > 5 {
				return false
			}
		}
		if ex := s.Excludes; ex != nil {
			if slices.Contains(ex.Arches, "amd64") {
				return false
			}
			// Excludes.Caps names capabilities whose holders lose the rule;
			// the container holds none.
		}
		return true
	}
	for _, s := range p.Syscalls {
		if !slices.Contains(s.Names, name) && s.Name != name {
			continue
		}
		if !applies(s) {
			continue
		}
		if string(s.Action) != "SCMP_ACT_ALLOW" {
			return "blocked", string(s.Action)
		}
		if len(s.Args) == 0 {
			return "allowed", "allow rule without conditions"
		}
		arg, ok := probeArg0[name]
		if !ok {
			return "conditional", "allow rule with argument conditions"
		}
		for _, a := range s.Args {
			if a.Index == 0 && string(a.Op) == "SCMP_CMP_EQ" && a.Value == arg {
				return "allowed", "allow rule for the probe's argument"
			}
		}
		continue // this conditional rule does not match the probe's argument
	}
	return "blocked", "default action " + string(p.DefaultAction)
}

func syscallOfProbe(id string) string {
	return strings.ReplaceAll(strings.TrimPrefix(id, "syscalls."), "-", "_")
}

func TestSeccompCrossCheckWithDockerDefault(t *testing.T) {
	def := seccomp.DefaultProfile()

	// The hardened reference's profile file must be that profile: otherwise
	// the comparison below would check the wrong thing.
	b, err := os.ReadFile("../fixtures/targets/seccomp-default.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture seccomp.Seccomp
	if err := json.Unmarshal(b, &fixture); err != nil {
		t.Fatalf("seccomp-default.json: %v", err)
	}

	var ids []string
	for _, s := range probes.Catalog() {
		if s.Category == "syscalls" {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		t.Fatal("no syscalls probes in the catalog")
	}
	predicted := map[string]string{}
	for _, id := range ids {
		name := syscallOfProbe(id)
		v, why := profileVerdict(def, name)
		fv, _ := profileVerdict(&fixture, name)
		if fv != v {
			t.Errorf("%s: DefaultProfile() says %s, fixtures/targets/seccomp-default.json says %s", name, v, fv)
		}
		if v == "conditional" {
			t.Errorf("%s: the profile allows it only for some arguments; add the probe's argument to probeArg0", name)
		}
		predicted[id] = v
		t.Logf("%-20s default profile: %-7s (%s)", name, v, why)
	}

	r := sandcheck(t, "run", "--target", "fixtures/targets/hardened.yaml", "--probes", "syscalls.*", "--quiet")
	rec := r.mustRecord(t)
	got := map[string]probes.Outcome{}
	for i, res := range rec.Results {
		got[res.Probe] = rec.Effective(i)
	}
	var agree, explained []string
	for _, id := range ids {
		name := syscallOfProbe(id)
		o, ok := got[id]
		if !ok {
			t.Errorf("%s: no result in run.json", id)
			continue
		}
		want := probes.Blocked
		if predicted[id] == "allowed" {
			want = probes.Escaped
		}
		reason, known := knownDifferences[name]
		switch {
		case o == want && known:
			t.Errorf("%s: listed as a known difference (%s) but the probe agrees with the profile (%s): remove the exception", name, reason, o)
		case o == want:
			agree = append(agree, name)
		case known:
			explained = append(explained, name+" ("+reason+")")
		default:
			t.Errorf("%s: the default profile says %s, the probe on the hardened reference reported %s: a probe or profile defect", name, predicted[id], o)
		}
	}
	for name := range knownDifferences {
		if !slices.Contains(ids, "syscalls."+strings.ReplaceAll(name, "_", "-")) {
			t.Errorf("known difference %s has no probe", name)
		}
	}
	t.Logf("agree with the default profile: %d: %s", len(agree), strings.Join(agree, ", "))
	t.Logf("known, reasoned differences: %d: %s", len(explained), strings.Join(explained, "; "))
}

// TestSeccompCrossCheckLeftOut records why the family has no probe for these
// syscalls: the default profile allows them to every container on amd64, so
// a probe expecting "blocked" would be a false claim on the hardened
// reference (see probes/impl/syscalls_table.go).
func TestSeccompCrossCheckLeftOut(t *testing.T) {
	def := seccomp.DefaultProfile()
	for _, name := range []string{"ptrace", "process_vm_readv", "process_vm_writev", "name_to_handle_at", "modify_ldt"} {
		if v, why := profileVerdict(def, name); v != "allowed" {
			t.Errorf("%s: the default profile now says %s (%s): add a probe for it", name, v, why)
		}
		if _, ok := probes.Lookup("syscalls." + strings.ReplaceAll(name, "_", "-")); ok {
			t.Errorf("%s has a probe although the default profile allows it", name)
		}
	}
}

// kernelBuiltWithout maps the syscalls left out of the family for the host's
// kernel build to the option that would make them reachable: without it the
// weak reference answers ENOSYS too, so a probe could not tell a sandbox from
// the kernel's build (see probes/impl/syscalls_table.go).
var kernelBuiltWithout = map[string]string{
	"kexec_load":      "CONFIG_KEXEC",
	"kexec_file_load": "CONFIG_KEXEC_FILE",
	"init_module":     "CONFIG_MODULES",
	"finit_module":    "CONFIG_MODULES",
	"delete_module":   "CONFIG_MODULES",
	"iopl":            "CONFIG_X86_IOPL_IOPERM",
	"ioperm":          "CONFIG_X86_IOPL_IOPERM",
}

// TestSeccompCrossCheckKernelLacks records the other reason for a missing
// probe: the default profile blocks these syscalls for a container without
// capabilities (so a probe would agree with it on the hardened reference),
// but this host's kernel is built without them, so the weak reference could
// not escape. When the kernel gains the option the test fails: add the probe.
func TestSeccompCrossCheckKernelLacks(t *testing.T) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Skipf("the kernel does not publish its build options (%v): cannot tell which syscalls it lacks", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("reading /proc/config.gz: %v", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 4<<20))
	if err != nil {
		t.Fatalf("reading /proc/config.gz: %v", err)
	}
	config := string(raw)
	def := seccomp.DefaultProfile()
	for name, option := range kernelBuiltWithout {
		if v, why := profileVerdict(def, name); v != "blocked" {
			t.Errorf("%s: the default profile says %s (%s) for a container without capabilities", name, v, why)
		}
		if strings.Contains(config, "\n"+option+"=y") || strings.Contains(config, "\n"+option+"=m") {
			t.Errorf("%s: the kernel is built with %s now: add a probe for it", name, option)
		}
		if _, ok := probes.Lookup("syscalls." + strings.ReplaceAll(name, "_", "-")); ok {
			t.Errorf("%s has a probe although this kernel lacks it", name)
		}
	}
}
