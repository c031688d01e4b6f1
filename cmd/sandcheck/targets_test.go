package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
