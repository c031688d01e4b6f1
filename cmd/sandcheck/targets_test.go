package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners/docker"
	"github.com/sandcheck/sandcheck/targets"
)

// base is a target the run accepts on this machine (the first-party image,
// no network, nothing from the host).
const base = `schema: sandcheck.dev/target/v1
name: v
runner: docker
image: sandcheck/runner:dev
profile: high-risk-code
docker:
  runtime: runc
  network: none
`

// TestValidateRunsEveryRunCheck: each file here is refused by sandcheck run
// before it starts anything. Before validate shared docker.Preflight with the
// run, it passed the ones marked loadPasses (it only loaded the file), 12 of
// the 16.
func TestValidateRunsEveryRunCheck(t *testing.T) {
	if err := docker.Ping(context.Background()); err != nil {
		t.Skipf("no docker engine: %v", err)
	}
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("bad.json", "not json")
	static, dynamic := "/bin/busybox", "/bin/ls"
	cases := []struct {
		name, src, probe, says string
		loadPasses             bool
	}{
		{"ok", base, static, "", true},
		{"two documents", base + "---\n" + base, static, "holds 2 YAML documents", false},
		{"empty file", "", static, "the file is empty", false},
		{"image not present", strings.Replace(base, "sandcheck/runner:dev", "sandcheck/absent:none", 1), static, "not found", true},
		{"seccomp profile missing", base + "  seccomp: missing.json\n", static, "reading seccomp profile", true},
		{"seccomp profile not JSON", base + "  seccomp: bad.json\n", static, "is not a JSON object", true},
		{"mount source missing", base + "  mounts:\n    - {source: ./nowhere, target: /m}\n", static, "does not exist", true},
		{"mount source escapes the run folder", base + "  mounts:\n    - {source: \"${SANDCHECK_RUN_DIR}/../../etc\", target: /m}\n", static, "leaves the run's folder", false},
		{"network missing", strings.Replace(base, "network: none", "network: sandcheck-no-such-net", 1), static, "does not exist", true},
		{"container network", strings.Replace(base, "network: none", "network: \"container:x\"", 1), static, "joins another container's network", false},
		{"device missing", base + "  devices:\n    - {source: /dev/sandcheck-none, target: /dev/x}\n", static, "host device", true},
		{"device not a device", base + "  devices:\n    - {source: /etc/hostname, target: /dev/x}\n", static, "is not a device", true},
		{"env name", base + "  env: {\"A B\": x}\n", static, "is not a variable name", true},
		{"cpus", base + "  cpus: 5000\n", static, "out of range", true},
		{"tmpfs twice", base + "  tmpfs:\n    - {path: /tmp, size: 1Mi}\n    - {path: /tmp, size: 2Mi}\n", static, "listed twice", true},
		{"mount target not clean", base + "  mounts:\n    - {source: /etc/hostname, target: /a/../b}\n", static, "not a clean absolute path", true},
		{"tmpfs on the probe folder", base + "  tmpfs:\n    - {path: /.sandcheck, size: 1Mi}\n", static, "reserved for the probe binary", true},
		{"dynamic probe binary", base, dynamic, "dynamically linked", true},
	}
	gap := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(c.name, " ", "-")+".yaml", c.src)
			if _, err := targets.Load(p); (err == nil) != c.loadPasses {
				t.Errorf("targets.Load alone: %v (want passing %v)", err, c.loadPasses)
			}
			var out, errw bytes.Buffer
			ok := validateTarget(context.Background(), &out, &errw, p, c.probe)
			switch {
			case c.says == "" && !ok:
				t.Errorf("refused: %s", errw.String())
			case c.says != "" && (ok || !strings.Contains(errw.String(), c.says)):
				t.Errorf("ok %v, output %q %q; want a refusal saying %q", ok, out.String(), errw.String(), c.says)
			}
		})
		if c.says != "" && c.loadPasses {
			gap++
		}
	}
	t.Logf("%d files that loading alone passes are refused", gap)
}

// TestImportFromRealContainer starts a container the way a platform might
// (docker run, network none), imports it, and checks that every setting is
// in the target or named in a note, and that the target validates.
func TestImportFromRealContainer(t *testing.T) {
	if err := docker.Ping(context.Background()); err != nil {
		t.Skipf("no docker engine: %v", err)
	}
	name := "sandcheck-import-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:20]
	vol := name + "-vol"
	cleanup := func() {
		_ = exec.Command("docker", "rm", "-f", name).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", vol).Run()
	}
	cleanup()
	t.Cleanup(cleanup)
	out, err := exec.Command("docker", "run", "-d", "--name", name, "--network", "none",
		"--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--sysctl", "kernel.msgmax=65536",
		"--label", "acme.io/run=r1", "--label", "sandcheck.run=forged", "-v", vol+":/cache", "--tmpfs", "/tmp:size=16m,noexec",
		"--ulimit", "nofile=256:512", "--pids-limit", "64", "-m", "128m", "--memory-swap", "128m", "--cpus", "0.5", "--read-only",
		"--security-opt", "no-new-privileges", "--ipc", "private", "--group-add", "123", "--add-host", "db:10.0.0.5",
		"--restart", "on-failure:2", "-e", "FOO=bar", "-e", "SANDCHECK_X=1", "-w", "/tmp",
		"sandcheck/runner:dev", "sleep", "60").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	im, err := docker.Import(context.Background(), name, docker.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := renderImport(im)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "imported.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var errw bytes.Buffer
	if !validateTarget(context.Background(), io.Discard, &errw, p, "/bin/busybox") {
		t.Fatalf("the imported target does not validate: %s\n%s", errw.String(), b)
	}
	tg, err := targets.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	d := tg.Docker
	checks := map[string]bool{
		"caps":      slices.Equal(d.CapDrop, []string{"ALL"}) && slices.Equal(d.CapAdd, []string{"NET_BIND_SERVICE"}),
		"sysctl":    d.Sysctls["kernel.msgmax"] == "65536",
		"label":     d.Labels["acme.io/run"] == "r1" && d.Labels["sandcheck.run"] == "",
		"volume":    len(d.Volumes) == 1 && d.Volumes[0].Name == vol && d.Volumes[0].Target == "/cache",
		"tmpfs":     len(d.Tmpfs) == 1 && d.Tmpfs[0].Path == "/tmp" && d.Tmpfs[0].Size == "16m" && !d.Tmpfs[0].Exec,
		"ulimit":    len(d.Ulimits) == 1 && d.Ulimits[0] == targets.Ulimit{Name: "nofile", Soft: 256, Hard: 512},
		"limits":    d.PidsLimit == 64 && d.Memory == "134217728" && d.CPUs == 0.5,
		"hardening": d.ReadOnlyRootfs && d.NoNewPrivileges && d.Network == "none" && d.IPC == "private",
		"groups":    slices.Equal(d.GroupAdd, []string{"123"}) && slices.Equal(d.ExtraHosts, []string{"db:10.0.0.5"}),
		"env":       d.Env["FOO"] == "bar" && d.Env["SANDCHECK_X"] == "",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s not imported: %+v", what, d)
		}
	}
	notes := strings.Join(im.Notes, "\n")
	for _, want := range []string{"RestartPolicy", "Config.Cmd", "Config.WorkingDir", "label sandcheck.run=forged", "env SANDCHECK_X", "profile:", "launch: assumed exec", "identity labels: none given"} {
		if !strings.Contains(notes, want) || !strings.Contains(string(b), want) {
			t.Errorf("no note naming %s in\n%s", want, b)
		}
	}
	if d.Launch != "exec" || tg.Profile != "high-risk-code" {
		t.Errorf("assumed launch %q profile %q, want exec and high-risk-code", d.Launch, tg.Profile)
	}
	// What the container cannot say, said by the user: written as given,
	// with no assumption noted.
	told, err := docker.Import(context.Background(), name, docker.ImportOptions{Profile: "no-network-transform", Launch: "task",
		IdentityLabels: map[string]string{"acme.io/task": "${SANDCHECK_TASK}", "acme.io/run": "${SANDCHECK_RUN_ID}"}})
	if err != nil {
		t.Fatal(err)
	}
	td := told.Target.Docker
	if told.Target.Profile != "no-network-transform" || td.Launch != "task" || td.Labels["acme.io/task"] != "${SANDCHECK_TASK}" || td.Labels["acme.io/run"] != "${SANDCHECK_RUN_ID}" {
		t.Errorf("told import: profile %q launch %q labels %v", told.Target.Profile, td.Launch, td.Labels)
	}
	for _, n := range told.Notes {
		if strings.HasPrefix(n, "profile:") || strings.HasPrefix(n, "launch:") || strings.HasPrefix(n, "identity labels:") {
			t.Errorf("told import still notes an assumption: %s", n)
		}
	}
	if _, err := docker.Import(context.Background(), name, docker.ImportOptions{Launch: "pooled"}); err == nil || !strings.Contains(err.Error(), `launch "pooled"`) {
		t.Errorf("--launch pooled: %v, want an error naming it", err)
	}
}

// A command target whose programs are not on this machine: validate refuses
// it (exit 2) naming file, line, field and program, in text and in --json.
func TestValidateMissingCommandProgram(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cmd.yaml")
	src := "schema: sandcheck.dev/target/v1\nname: c\nimage: i\nprofile: high-risk-code\nrunner: command\ncommand:\n  network: none\n" +
		"  create: [sandcheck-no-such-tool, new]\n  exec: [sh, -c, \"${ARGV_SHELL}\"]\n  copy_in: [sh, -c, \"${SRC}${ID}${DST}\"]\n  destroy: [sh, -c, \"${ID}\"]\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := p + `:8:12: $.command.create[0]: program "sandcheck-no-such-tool" cannot be run here`
	for _, args := range [][]string{{"validate", p}, {"validate", "--output=json", p}} {
		code, out := exitOf(t, targetsCmd(), args...)
		if code != exitHarness || !strings.Contains(strings.ReplaceAll(out, `\"`, `"`), want) || strings.Contains(out, ": ok") {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", args, code, exitHarness, want, out)
		}
	}
}
