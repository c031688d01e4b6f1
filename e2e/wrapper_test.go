package e2e

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// wrapperCategories are the categories whose probes the wrapper
// references are held to here, each with why it gives what it gives:
// where root and user runs differ and the wrappers' settings show. The
// runs are the package's shared whole-catalog ones, which
// TestReferenceResults holds to each reference's whole result.
var wrapperCategories = []string{"privilege", "host"}

// wrapperReference is one wrapper reference target and what it is held
// to: every probe of wrapperCategories that applies is blocked, except those
// listed with the outcomes it gives and why.
type wrapperReference struct {
	target string
	differ map[string]controlGap
}

// The reasons the references share.
var (
	// The host view of the box (mounts of host file systems, /proc/keys)
	// comes with every wrapper: none of them gives the box a root of its own.
	hostMounts = controlGap{[]probes.Outcome{probes.Escaped}, "the wrapper shows the box the host's file systems (read-only or not)"}
	procKeys   = controlGap{[]probes.Outcome{probes.Escaped}, "no wrapper masks /proc/keys"}
	// As root without a user namespace of its own, uid 0 is the host's.
	hostRoot = controlGap{[]probes.Outcome{probes.Escaped}, "started as root, the box's uid 0 is the host's"}
)

var wrapperReferences = []wrapperReference{
	{"wrapper-bwrap", map[string]controlGap{
		"host.bind-mounts":           hostMounts,
		"host.proc-unmasked":         procKeys,
		"privilege.seccomp":          {[]probes.Outcome{probes.Escaped}, "bwrap by hand applies no seccomp filter"},
		"privilege.userns-create":    {[]probes.Outcome{probes.Escaped}, "no seccomp filter: the box may make user namespaces"},
		"privilege.uid0-host-mapped": {[]probes.Outcome{probes.Escaped}, "bwrap's nested user namespaces: the probe sees uid 0 of bwrap's outer namespace, not the host's (as for the bwrap runner)"},
	}},
	{"wrapper-srt-root", map[string]controlGap{
		"host.bind-mounts":           hostMounts,
		"host.proc-unmasked":         procKeys,
		"host.sysrq-trigger":         {[]probes.Outcome{probes.Escaped}, "root in the host's user namespace with a fresh read-write /proc"},
		"host.core-pattern":          {[]probes.Outcome{probes.Escaped}, "root in the host's user namespace with a fresh read-write /proc: core_pattern opens for writing"},
		"host.honeyfile":             {[]probes.Outcome{probes.Escaped}, "srt denies no read by default: root reads the harness's host honeyfile"},
		"privilege.root-uid":         hostRoot,
		"privilege.uid0-host-mapped": hostRoot,
		"privilege.dangerous-caps":   {[]probes.Outcome{probes.Escaped}, "srt keeps root's capabilities (27 in CapEff)"},
		"privilege.ptrace-other":     {[]probes.Outcome{probes.Escaped}, "root with CAP_SYS_PTRACE"},
	}},
	{"wrapper-srt-user", map[string]controlGap{
		"host.bind-mounts":         hostMounts,
		"host.proc-unmasked":       procKeys,
		"privilege.dangerous-caps": {[]probes.Outcome{probes.Escaped}, "srt leaves 27 capabilities in the bounding set (none effective)"},
	}},
	{"wrapper-srt-strict", map[string]controlGap{
		"host.bind-mounts":         hostMounts,
		"host.proc-unmasked":       procKeys,
		"privilege.dangerous-caps": {[]probes.Outcome{probes.Escaped}, "srt leaves 27 capabilities in the bounding set (none effective); its settings have no capability key"},
	}},
	{"wrapper-firejail", map[string]controlGap{
		"host.bind-mounts":           hostMounts,
		"host.proc-unmasked":         procKeys,
		"privilege.root-uid":         hostRoot,
		"privilege.uid0-host-mapped": hostRoot,
		"privilege.dangerous-caps":   {[]probes.Outcome{probes.Escaped}, "firejail's default profile keeps 18 capabilities of root"},
	}},
	{"wrapper-firejail-user", map[string]controlGap{
		"host.bind-mounts":   hostMounts,
		"host.proc-unmasked": procKeys,
	}},
	{"wrapper-firejail-strict", map[string]controlGap{
		"host.bind-mounts":           hostMounts,
		"host.proc-unmasked":         procKeys,
		"host.engine-socket":         {[]probes.Outcome{probes.Escaped}, "as root, firejail leaves /var/run/docker.sock in place and root may connect"},
		"host.block-devices":         {[]probes.Outcome{probes.Escaped}, "as root, firejail leaves the host's /dev with its block devices"},
		"privilege.root-uid":         {[]probes.Outcome{probes.Escaped}, "--noroot does nothing for root: firejail's user namespace maps the current user"},
		"privilege.uid0-host-mapped": hostRoot,
		"privilege.userns-create":    {[]probes.Outcome{probes.Escaped}, "firejail's seccomp filter lets the box make user namespaces"},
	}},
	{"wrapper-firejail-strict-user", map[string]controlGap{
		"host.bind-mounts":        hostMounts,
		"host.proc-unmasked":      procKeys,
		"privilege.userns-create": {[]probes.Outcome{probes.Escaped}, "firejail's seccomp filter lets the box make user namespaces"},
	}},
}

// TestWrapperReferences runs each wrapper reference through sandcheck and
// holds it, probe by probe, to what it is declared to give, so an upstream
// fix or regression shows as a change; then the root and user runs of srt's
// defaults must differ where a user namespace mapping to an unprivileged
// user makes the difference.
func TestWrapperReferences(t *testing.T) {
	binDir(t) // skips in -short mode, where the comparisons below have no runs
	ensureAgentAccount(t)
	recs := map[string]*evidence.Record{}
	for _, ref := range wrapperReferences {
		t.Run(ref.target, func(t *testing.T) {
			requireWrapperTools(t)
			r := sharedRun(t, ref.target+".yaml", false)
			rec := r.mustRecord(t)
			if r.code != 1 {
				t.Errorf("exit code %d, want 1 (criteria fail)\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if rec.Runner != "wrapper" {
				t.Errorf("runner %q recorded", rec.Runner)
			}
			if rec.Verdict == nil || rec.Verdict.Pass {
				t.Errorf("verdict %+v: every wrapper reference is declared to fail", rec.Verdict)
			}
			selectedHold(t, rec, ref.differ)
			recs[ref.target] = rec
		})
	}
	t.Run("firejail-root-vs-user", func(t *testing.T) {
		root, user := recs["wrapper-firejail"], recs["wrapper-firejail-user"]
		if root == nil || user == nil {
			t.Fatal("the firejail root or user run gave no record (see its subtest)")
		}
		for _, probe := range []string{"privilege.root-uid", "privilege.uid0-host-mapped", "privilege.dangerous-caps"} {
			ro, uo := outcomeOf(t, root, probe), outcomeOf(t, user, probe)
			if ro.Outcome != probes.Escaped || uo.Outcome != probes.Blocked {
				t.Errorf("%s: root %s (%s), user %s (%s); want escaped as root, blocked as a user (the same profile)", probe, ro.Outcome, ro.Detail, uo.Outcome, uo.Detail)
			}
		}
	})
	t.Run("firejail-strict-root-vs-user", func(t *testing.T) {
		root, user := recs["wrapper-firejail-strict"], recs["wrapper-firejail-strict-user"]
		if root == nil || user == nil {
			t.Fatal("the strict firejail root or user run gave no record (see its subtest)")
		}
		// The same settings: as root the host's engine socket, block
		// devices and uid 0 stay the box's (--noroot maps the current
		// user), as a user none of them.
		for _, probe := range []string{"host.engine-socket", "host.block-devices", "privilege.root-uid", "privilege.uid0-host-mapped"} {
			ro, uo := outcomeOf(t, root, probe), outcomeOf(t, user, probe)
			if ro.Outcome != probes.Escaped || uo.Outcome != probes.Blocked {
				t.Errorf("%s: root %s (%s), user %s (%s); want escaped as root, blocked as a user (the same settings)", probe, ro.Outcome, ro.Detail, uo.Outcome, uo.Detail)
			}
		}
	})
	t.Run("srt-root-vs-user", func(t *testing.T) {
		root, user := recs["wrapper-srt-root"], recs["wrapper-srt-user"]
		if root == nil || user == nil {
			t.Fatal("the srt root or user run gave no record (see its subtest)")
		}
		for _, c := range []struct{ probe, why string }{
			{"privilege.uid0-host-mapped", "user namespace mapping: root's uid 0 is the host's, nobody's is 65534"},
			{"privilege.root-uid", "the box's uid"},
			{"host.core-pattern", "core_pattern opens for writing only for the host's root"},
		} {
			ro, uo := outcomeOf(t, root, c.probe), outcomeOf(t, user, c.probe)
			if ro.Outcome != probes.Escaped || uo.Outcome != probes.Blocked {
				t.Errorf("%s (%s): root %s (%s), user %s (%s); want escaped as root, blocked as a user", c.probe, c.why, ro.Outcome, ro.Detail, uo.Outcome, uo.Detail)
			}
		}
		// Capabilities: both escape (srt keeps a full bounding set), but
		// only root's are effective.
		ro, uo := outcomeOf(t, root, "privilege.dangerous-caps"), outcomeOf(t, user, "privilege.dangerous-caps")
		if !strings.Contains(ro.Detail, "in CapEff") || strings.Contains(uo.Detail, "in CapEff") {
			t.Errorf("privilege.dangerous-caps: root %q, user %q; want effective capabilities as root only", ro.Detail, uo.Detail)
		}
	})
}

// selectedHold checks every probe of wrapperCategories: blocked (or not
// applicable, for a probe of another runner), except the listed ones,
// which must give one of their outcomes; a listed probe the run did not
// select is an error, so the list stays the run's. The run must have no
// harness error, no untested probe and leave nothing at teardown.
func selectedHold(t *testing.T, rec *evidence.Record, differ map[string]controlGap) {
	t.Helper()
	// No LSM is loaded on the machines these run on (Debian 12 without
	// AppArmor enabled): the probe says not-applicable for every wrapper.
	differ = maps.Clone(differ)
	if _, ok := differ["privilege.lsm"]; !ok {
		differ["privilege.lsm"] = controlGap{[]probes.Outcome{probes.NotApplicable, probes.Blocked}, "no LSM label: no LSM loaded on this host"}
	}
	seen := map[string]bool{}
	specs := map[string]probes.Spec{}
	for _, s := range probes.Catalog() {
		specs[s.ID] = s
	}
	selected := 0
	for i, r := range rec.Results {
		if !slices.Contains(wrapperCategories, r.Category) {
			continue
		}
		selected++
		seen[r.Probe] = true
		eff := rec.Effective(i)
		s, ok := specs[r.Probe]
		if !ok {
			t.Errorf("%s: not in the catalog", r.Probe)
			continue
		}
		if !s.AppliesTo(rec.Runner) {
			if eff != probes.NotApplicable {
				t.Errorf("%s on %s: %s, want not-applicable", r.Probe, rec.Target.Name, eff)
			}
			continue
		}
		if g, listed := differ[r.Probe]; listed {
			if !slices.Contains(g.got, eff) {
				t.Errorf("%s on %s: declared %v (%s), gave %s (%s): update the list", r.Probe, rec.Target.Name, g.got, g.why, eff, r.Detail)
			}
			continue
		}
		if eff != probes.Blocked {
			t.Errorf("%s on %s: %s (%s), want blocked", r.Probe, rec.Target.Name, eff, r.Detail)
		}
	}
	for id := range differ {
		if !seen[id] {
			t.Errorf("%s is listed for %s but the run has no result for it", id, rec.Target.Name)
		}
	}
	if selected < 20 {
		t.Errorf("%s: only %d results in %v", rec.Target.Name, selected, wrapperCategories)
	}
	if len(rec.Errors) > 0 {
		t.Errorf("harness errors: %v", rec.Errors)
	}
	for _, sb := range rec.Sandboxes {
		if len(sb.Teardown) > 0 {
			t.Errorf("sandbox %s left %v", sb.Name, sb.Teardown)
		}
	}
}

// outcomeOf is the result of one probe in a record.
func outcomeOf(t *testing.T, rec *evidence.Record, probe string) evidence.Result {
	t.Helper()
	for _, r := range rec.Results {
		if r.Probe == probe {
			return r
		}
	}
	t.Errorf("%s: no result for %s", rec.Target.Name, probe)
	return evidence.Result{}
}

// requireWrapperTools fails when the wrappers make setup installs are
// missing: e2e runs where setup ran.
func requireWrapperTools(t *testing.T) {
	t.Helper()
	for _, p := range []string{"/usr/bin/bwrap", "/usr/bin/firejail", "/opt/sandcheck/srt/node_modules/.bin/srt"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed (make setup installs it): %v", p, err)
		}
	}
}

// agentAccount is the unprivileged account wrapper-firejail-user starts
// firejail as: firejail runs the command through the user's login shell,
// so nobody (nologin) will not do.
const agentAccount = "sandcheck-agent"

// ensureAgentAccount creates agentAccount when the host lacks it (make
// setup does not make it yet) and removes it at the end of the test.
func ensureAgentAccount(t *testing.T) {
	t.Helper()
	if exec.Command("id", agentAccount).Run() == nil {
		return
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/bin/sh", agentAccount).CombinedOutput(); err != nil {
		t.Fatalf("creating the account %s: %v: %s", agentAccount, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", agentAccount).CombinedOutput(); err != nil {
			t.Errorf("removing the account %s: %v: %s", agentAccount, err, out)
		}
	})
}

// TestWrapperThatRunsNothingIsAHarnessError: a target whose wrapper exits 0
// without running the command (or prints nothing) ends the run as a
// harness error (exit 2) with one message naming it, never a pass.
func TestWrapperThatRunsNothingIsAHarnessError(t *testing.T) {
	for name, argv := range map[string]string{
		"true":   `[true, "${ARGV}"]`,
		"silent": `[sh, -c, ">/dev/null 2>&1 ${ARGV_SHELL}"]`,
		// A banner, then a failure to run the command (issue 41 item 6):
		// the banner's bytes are not the probe's list.
		"banner": `[sh, -c, "echo 'sandbox ready: running your command'; exit 0", "${ARGV_SHELL}"]`,
	} {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "nothing.yaml")
			body := "schema: sandcheck.dev/target/v1\nname: wrapper-nothing\nrunner: wrapper\nprofile: no-network-transform\n" +
				"wrapper:\n  argv: " + argv + "\n  user: root\n  network: none\n"
			if err := os.WriteFile(target, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			r := sandcheck(t, "run", "--target", target, "--quiet", "--probes", "privilege.*")
			if r.code != 2 {
				t.Fatalf("exit code %d, want 2 (harness error)\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			const msg = "the wrapper did not run the command"
			if n := strings.Count(r.stderr, msg); n != 1 {
				t.Errorf("stderr names %q %d times, want once:\n%s", msg, n, r.stderr)
			}
			if strings.Contains(r.stdout, "verdict: PASS") {
				t.Errorf("a wrapper that runs nothing passed:\n%s", r.stdout)
			}
			if rec := r.rec; rec != nil {
				for _, res := range rec.Results {
					if res.Outcome == probes.Blocked || res.Outcome == probes.Escaped {
						t.Errorf("%s: %s from a wrapper that ran nothing", res.Probe, res.Outcome)
					}
				}
			}
		})
	}
}
