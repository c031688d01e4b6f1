package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// commandSessionFindings are what the hardened docker-CLI target shows
// through the command runner and the docker reference does not: the
// command runner has no task launch, so every task is exec'd into one
// long-lived sandbox (a session platform), and what one task leaves
// running or in scratch is there for the next.
// commandSmall is the selection of the command references at the small
// size (make test; make test-full runs the whole catalog): the families of
// commandSessionFindings and commandWeakHolds, the privilege family, and
// metadata (no path fact through this runner: unconfirmed, never blocked).
const commandSmall = "privilege.*,host.*,secrets.*,persistence.*,metadata.*,resources.s*"

var commandSessionFindings = map[string]bool{
	"resources.sigterm-ignore":       true,
	"resources.setsid-daemon":        true,
	"persistence.background-process": true,
	"persistence.scratch-not-empty":  true,
}

// commandWeakHolds are probes the weak docker-CLI target blocks through the
// command runner: the runner mounts nothing of the harness's into a
// platform's sandbox (honey credentials, the service-account token, the
// agent socket, the host honeyfile, the block-device canary), and the
// docker-CLI target keeps no storage across runs.
var commandWeakHolds = map[string]string{
	"metadata.k8s-service-account":  "no service-account token mounted",
	"secrets.cloud-cli-credentials": "no honey home mounted",
	"secrets.kubeconfig":            "no honey home mounted",
	"secrets.docker-config":         "no honey home mounted",
	"secrets.netrc":                 "no honey home mounted",
	"secrets.ssh-keys":              "no honey home mounted",
	"secrets.git-credentials":       "no honey home mounted",
	"secrets.package-tokens":        "no honey home mounted",
	"secrets.agent-socket":          "no agent socket mounted",
	"host.honeyfile":                "no host folder mounted",
	"host.block-devices":            "no block device passed in",
	"persistence.marker-next-run":   "no storage kept from one run to the next",
}

// containersNamed lists containers whose name holds s.
func containersNamed(t *testing.T, s string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--all", "--format", "{{.Names}}", "--filter", "name="+s).Output()
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return strings.Fields(string(out))
}

func commandRun(t *testing.T, target string) *evidence.Record {
	t.Helper()
	args := []string{"run", "--target", "fixtures/targets/" + target, "-q"}
	if smallSize(t) {
		args = append(args, "--probes", commandSmall)
	}
	r := sandcheck(t, args...)
	rec := r.mustRecord(t)
	if r.code == 2 || len(rec.Errors) > 0 {
		t.Fatalf("exit %d, harness errors %v\n%s", r.code, rec.Errors, r.stderr)
	}
	if left := containersNamed(t, "sandcheck-"+rec.RunID); len(left) > 0 {
		t.Errorf("the run left sandboxes on the platform: %v", left)
	}
	counts := map[probes.Outcome]int{}
	ran := map[string]bool{}
	for i, res := range rec.Results {
		counts[rec.Effective(i)]++
		ran[res.Probe] = true
	}
	for id := range commandSessionFindings {
		if !ran[id] {
			t.Errorf("%s: session finding %s was not run (commandSmall leaves it out?)", target, id)
		}
	}
	for id := range commandWeakHolds {
		if !ran[id] {
			t.Errorf("%s: %s (commandWeakHolds) was not run (commandSmall leaves it out?)", target, id)
		}
	}
	t.Logf("%s: %d results, effective %v, %d sandboxes, start %.1fs", target, len(rec.Results), counts, len(rec.Sandboxes), rec.Timing.SandboxStartSeconds)
	return rec
}

// notTestedForCommand reports whether a result is not tested for what the
// command runner lacks (never for another reason).
func notTestedForCommand(t *testing.T, r evidence.Result) bool {
	if r.Outcome != probes.NotTested {
		return false
	}
	if !strings.Contains(r.Detail, "runner command lacks") {
		t.Errorf("%s not tested for another reason: %s", r.Probe, r.Detail)
	}
	return true
}

// noPathFact reports whether the host said it has no path fact for the
// result's sandbox (runtime/netpath-none).
func noPathFact(r evidence.Result) bool {
	_, ok := hostItem(r, evidence.SourceRuntime, "netpath-none")
	return ok
}

// unconfirmedNamed reports whether a criterion of the verdict names the
// probe's "blocked" unconfirmed ("probe ID reported blocked but ...").
func unconfirmedNamed(rec *evidence.Record, id string) bool {
	for _, c := range rec.Verdict.Criteria {
		for _, m := range c.Reasons {
			if strings.HasPrefix(m, "probe "+id+" reported blocked but") {
				return true
			}
		}
	}
	return false
}

func TestCommandRunnerHardened(t *testing.T) {
	rec := commandRun(t, "command-hardened.yaml")
	byID := map[string]probes.Spec{}
	for _, s := range probes.Catalog() {
		byID[s.ID] = s
	}
	for i, r := range rec.Results {
		if notTestedForCommand(t, r) || r.Outcome == probes.NotApplicable {
			continue
		}
		want := byID[r.Probe].ExpectedOn(rec.Runner, rec.Target.Profile)
		got := rec.Effective(i)
		switch {
		case commandSessionFindings[r.Probe]:
			if got != probes.Escaped {
				t.Errorf("%s: %s; the session finding is gone (%s): update commandSessionFindings", r.Probe, got, r.Detail)
			}
		case want == probes.Blocked && got == evidence.Unconfirmed:
			// The command runner gives the host no view into its
			// sandboxes (no path fact: it cannot enter their network
			// namespace; no look at their files for the persistence
			// markers): a blocked the host cannot confirm reads
			// unconfirmed (no check, no pass), and the verdict says why.
			if !unconfirmedNamed(rec, r.Probe) {
				t.Errorf("%s: effective unconfirmed, but no criterion names it unconfirmed (%s)", r.Probe, r.Detail)
			}
			if byID[r.Probe].Category == "egress" || byID[r.Probe].Category == "metadata" {
				if !noPathFact(r) {
					t.Errorf("%s: unconfirmed, but the result has no runtime/netpath-none item (evidence %+v)", r.Probe, r.Evidence)
				}
			}
		case want == probes.Escaped || want == probes.Blocked:
			if got != want {
				t.Errorf("%s: effective %s, want %s (%s)", r.Probe, got, want, r.Detail)
			}
		}
	}
}

func TestCommandRunnerWeak(t *testing.T) {
	rec := commandRun(t, "command-weak.yaml")
	for i, r := range rec.Results {
		if notTestedForCommand(t, r) || r.Outcome == probes.NotApplicable {
			continue
		}
		got := rec.Effective(i)
		if why, ok := commandWeakHolds[r.Probe]; ok {
			if got == probes.Escaped {
				t.Errorf("%s escaped where it held before (%s): update commandWeakHolds", r.Probe, why)
			}
			continue
		}
		if got != probes.Escaped {
			t.Errorf("%s: effective %s on the weak target, want escaped (%s)", r.Probe, got, r.Detail)
		}
	}
}

// benchStart runs one shared-sandbox probe benchRounds times against a
// target and prints the median sandbox start seconds.
func benchStart(b *testing.B, runner, target string) {
	bin := os.Getenv("SANDCHECK_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../bin")
	}
	var starts []float64
	for range benchRounds {
		out := b.TempDir()
		cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", target, "--out-dir", out, "--quiet", "--probes", "privilege.root-uid")
		cmd.Dir = ".."
		if outb, err := cmd.CombinedOutput(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 2 {
				b.Fatalf("run failed: %v\n%s", err, outb)
			}
		}
		raw, err := os.ReadFile(filepath.Join(out, "run.json"))
		if err != nil {
			b.Fatal(err)
		}
		var rec evidence.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			b.Fatal(err)
		}
		starts = append(starts, rec.Timing.SandboxStartSeconds)
	}
	slices.Sort(starts)
	fmt.Printf("runner %-8s median sandbox start %.2fs over %d runs (min %.2fs, max %.2fs)\n", runner, starts[len(starts)/2], len(starts), starts[0], starts[len(starts)-1])
}

// BenchmarkCommandStart prints the median sandbox start time through the
// command runner with the docker CLI (create, docker cp of the probe, its
// check) (`make bench`).
func BenchmarkCommandStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root and a Docker engine")
	}
	benchStart(b, "command", "fixtures/targets/command-hardened.yaml")
}

// dockerCLITarget writes a command target driving the docker CLI with no
// network, its sandboxes labelled label, with exec and destroy as given
// (YAML flow sequences), and returns its path.
func dockerCLITarget(t *testing.T, label, execStep, destroyStep string) string {
	t.Helper()
	src := fmt.Sprintf(`schema: sandcheck.dev/target/v1
name: command-e2e
runner: command
image: sandcheck/runner:dev
profile: no-network-transform
command:
  network: none
  timeout: 5s
  create: [docker, run, --detach, --name, "${NAME}", --label, %q, --network, none, --user, "65534:65534",
    --cap-drop, ALL, --mount, "type=volume,dst=/.sandcheck", "${IMAGE}", sleep, "3600"]
  exec: %s
  copy_in: [docker, cp, "${SRC}", "${ID}:${DST}"]
  destroy: %s
  destroy_by_name: [docker, rm, --force, --volumes, "${NAME}"]
  list: [docker, ps, --all, --quiet, --no-trunc, --filter, %q]
`, label, execStep, destroyStep, "label="+label)
	p := filepath.Join(t.TempDir(), "command-e2e.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// removeLabelled removes every container carrying label.
func removeLabelled(t *testing.T, label string) {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--all", "--quiet", "--filter", "label="+label).Output()
	if err != nil {
		t.Errorf("listing containers: %v", err)
		return
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if b, err := exec.Command("docker", append([]string{"rm", "--force", "--volumes"}, ids...)...).CombinedOutput(); err != nil {
			t.Errorf("removing %v: %v: %s", ids, err, b)
		}
	}
}

// A platform whose exec step hangs after the sandbox started (the probe
// binary answered its list once, then nothing returns) is a harness error:
// exit 2, one message naming the exec step and its bounds. Before, every
// probe was an inconclusive timeout and the run exited 1.
func TestCommandHungExecExitsTwo(t *testing.T) {
	label := "sandcheck.e2e=hung-exec-" + fmt.Sprint(os.Getpid())
	t.Cleanup(func() { removeLabelled(t, label) })
	mark := filepath.Join(t.TempDir(), "answered-once")
	script := fmt.Sprintf(`if [ -e %s ]; then exec sleep 600; fi; touch %s; exec docker exec "$@"`, mark, mark)
	tg := dockerCLITarget(t, label, fmt.Sprintf(`[sh, -c, %q, hung-exec, "${ID}", "${ARGV}"]`, script), `[docker, rm, --force, --volumes, "${ID}"]`)
	r := sandcheck(t, "run", "--target", tg, "--probes", "privilege.[rdn]*", "-q")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("stderr:\n%s", r.stderr)
	lines := 0
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "the platform's exec step is hung") {
			lines++
			for _, want := range []string{"command exec (sh)", "nor within 5s", "sandcheck-probe list"} {
				if !strings.Contains(l, want) {
					t.Errorf("the message does not say %q: %s", want, l)
				}
			}
		}
	}
	if lines != 1 {
		t.Errorf("want one line naming the hung exec step, got %d:\n%s", lines, r.stderr)
	}
	if rec := r.mustRecord(t); rec.Verdict != nil && rec.Verdict.Pass {
		t.Errorf("a run whose probes could not run passed")
	}
}

// A destroy that returns while the sandbox is still there is seen through
// the target's list step: verified-teardown fails naming the sandbox
// (exit 1), with no harness error. Before, list was never used and the
// criterion passed.
func TestCommandDestroyCheckedByList(t *testing.T) {
	label := "sandcheck.e2e=lazy-destroy-" + fmt.Sprint(os.Getpid())
	t.Cleanup(func() { removeLabelled(t, label) })
	tg := dockerCLITarget(t, label, `[docker, exec, "${ID}", "${ARGV}"]`, `[sh, -c, "exit 0", lazy-destroy, "${ID}"]`)
	r := sandcheck(t, "run", "--target", tg, "--probes", "privilege.root-uid", "-q")
	t.Cleanup(func() { removeLabelled(t, label) }) // before the run's own leftover check
	rec := r.mustRecord(t)
	if r.code != 1 || len(rec.Errors) > 0 {
		t.Fatalf("exit %d (want 1), harness errors %v\n%s", r.code, rec.Errors, r.stderr)
	}
	if len(rec.Sandboxes) == 0 {
		t.Fatal("no sandbox in the record")
	}
	for _, sb := range rec.Sandboxes {
		if len(sb.Teardown) != 1 || !strings.Contains(sb.Teardown[0], sb.ID) || !strings.Contains(sb.Teardown[0], "still listed") {
			t.Errorf("sandbox %s: teardown leftovers %v, want one naming it as still listed", sb.ID, sb.Teardown)
		}
	}
	if c := criterion(rec, "verified-teardown"); c.Status != "fail" {
		t.Errorf("verified-teardown %q (%v), want fail", c.Status, c.Reasons)
	}
}
