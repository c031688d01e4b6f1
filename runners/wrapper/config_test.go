package wrapper

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/targets"
)

// The wrapper section is checked here, once, against this host too (the
// wrapper on PATH, the user, the settings files), and its problems name
// file, line and field as every target error does.
func TestSectionValidation(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nprofile: no-network-transform\nrunner: wrapper\n"
	dir := t.TempDir()
	file := filepath.Join(dir, "t.yaml")
	for _, tc := range []struct{ name, body, want string }{
		{"without section", "", "t.yaml:4:9: $.runner: runner wrapper needs a wrapper: section"},
		{"wrapper not on PATH", "wrapper:\n  argv: [no-such-wrapper-xyz, \"${ARGV}\"]\n  user: root\n  network: none\n", "t.yaml:6:10: $.wrapper.argv[0]: wrapper no-such-wrapper-xyz is not on PATH"},
		{"wrapper not on the target's PATH", "wrapper:\n  argv: [sh, -c, \"${ARGV_SHELL}\"]\n  user: root\n  env: {PATH: /nonexistent}\n  network: none\n", "$.wrapper.argv[0]: wrapper sh is not on PATH /nonexistent"},
		{"missing user", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: no-such-user-xyz\n  network: none\n", "t.yaml:7:9: $.wrapper.user: user \"no-such-user-xyz\" does not exist on this host"},
		{"missing uid", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: \"64999:64999\"\n  network: none\n", "$.wrapper.user: user \"64999:64999\" does not exist"},
		{"missing settings file", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  files: [{source: nope.json, path: s.json}]\n  network: none\n", "t.yaml:8:20: $.wrapper.files[0].source: stat " + filepath.Join(dir, "nope.json")},
		{"file outside workdir", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  files: [{source: t.yaml, path: ../s.json}]\n  network: none\n", "$.wrapper.files[0].path: must be a relative path inside ${WORKDIR}"},
		{"no command placeholder", "wrapper:\n  argv: [env]\n  user: root\n  network: none\n", "$.wrapper.argv: must hold ${ARGV} or ${ARGV_SHELL} exactly once (found 0)"},
		{"ARGV inside a word", "wrapper:\n  argv: [sh, -c, \"x ${ARGV}\"]\n  user: root\n  network: none\n", "$.wrapper.argv[2]: ${ARGV} must be a word of its own"},
		{"unknown placeholder", "wrapper:\n  argv: [env, \"${HOME}\", \"${ARGV}\"]\n  user: root\n  network: none\n", "$.wrapper.argv[1]: ${HOME} is not one of"},
		{"DNS without the harness network", "wrapper:\n  argv: [env, \"--dns=${DNS}\", \"${ARGV}\"]\n  user: root\n  network: none\n", "$.wrapper.argv[1]: ${DNS} names the harness's resolver: only with network harness or proxy"},
		{"host network", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  network: host\n", "t.yaml:8:12: $.wrapper.network: \"host\" is not one of [none harness proxy]"},
		{"no network", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n", "$.wrapper.network: is required"},
		{"reserved env", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  env: {SANDCHECK_X: y}\n  network: none\n", "$.wrapper.env.SANDCHECK_X: the SANDCHECK_ prefix is reserved"},
		{"proxy off loopback", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  network: proxy\n  proxies: [http://10.0.0.1:3128]\n", "$.wrapper.proxies[0]: host \"10.0.0.1\" is not on loopback"},
		{"proxy scheme", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  network: proxy\n  proxies: [\"https://localhost:3128\"]\n", "$.wrapper.proxies[0]: scheme \"https\" is not http, socks5 or socks5h"},
		{"proxies without network proxy", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  network: harness\n  proxies: [http://localhost:3128]\n", "$.wrapper.proxies: are the proxies of a wrapper that filters through one"},
		{"unknown key", "wrapper:\n  argv: [env, \"${ARGV}\"]\n  user: root\n  bogus: 1\n", "t.yaml:8:3: unknown field \"bogus\""},
	} {
		_, err := targets.Parse(file, []byte(head+tc.body))
		if err == nil || !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// The reference targets decode, with their settings files found next to
// them; their wrappers are checked on PATH only where make setup ran.
func TestReferencesDecode(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/targets/wrapper-*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("reference targets: %v %v", files, err)
	}
	for _, f := range files {
		tg, err := targets.Load(f)
		if err != nil {
			if strings.Contains(err.Error(), "is not on PATH") && os.Getenv("CI") != "true" {
				t.Logf("%s: %v (make setup installs the wrappers)", f, err)
				continue
			}
			if strings.Contains(err.Error(), `user "sandcheck-agent" does not exist`) && os.Getenv("CI") != "true" {
				// e2e makes the account when missing; make setup does not yet.
				t.Logf("%s: %v (useradd --system --no-create-home --shell /bin/sh sandcheck-agent)", f, err)
				continue
			}
			t.Errorf("%s: %v", f, err)
			continue
		}
		c := tg.Section.(*Config)
		if !slices.ContainsFunc(c.Argv, func(a string) bool { return a == VarArgv || strings.Contains(a, VarArgvShell) }) {
			t.Errorf("%s: argv %v runs no command", f, c.Argv)
		}
	}
}

// The argv template fills the command as separate words, as one quoted
// string, and the folders; the probe's paths point at its mount.
func TestExpand(t *testing.T) {
	argv := []string{"/p/x", "it's", "a b"}
	got, err := expand([]string{"w", "--dir", VarWorkdir, "--ro", VarProbeDir + "/f", "--", VarArgv}, argv, "/w", "/p", "")
	if err != nil || !slices.Equal(got, []string{"w", "--dir", "/w", "--ro", "/p/f", "--", "/p/x", "it's", "a b"}) {
		t.Errorf("expand ${ARGV}: %q %v", got, err)
	}
	got, _ = expand([]string{"w", "-c", VarArgvShell}, argv, "/w", "/p", "")
	if want := `'/p/x' 'it'\''s' 'a b'`; got[2] != want {
		t.Errorf("expand ${ARGV_SHELL}: %q, want %q", got[2], want)
	}
	// ${DNS} is the harness's resolver; without one the template cannot be
	// filled (firejail would be handed --dns= and pick its own).
	got, err = expand([]string{"w", "--dns=" + VarDNS, "--", VarArgv}, argv, "/w", "/p", "169.254.9.1")
	if err != nil || !slices.Equal(got[:2], []string{"w", "--dns=169.254.9.1"}) {
		t.Errorf("expand ${DNS}: %q %v", got, err)
	}
	if got, err := expand([]string{"w", "--dns=" + VarDNS, "--", VarArgv}, argv, "/w", "/p", ""); err == nil {
		t.Errorf("expand ${DNS} without a resolver: %q, want an error", got)
	}
	sb := &Sandbox{probe: "/run/x/probe"}
	rw := sb.rewrite([]string{"/.sandcheck/sandcheck-probe", "run", "--params", `{"probe_dir":"/.sandcheck","x":"/.sandcheck/go"}`, "/.sandcheckx"})
	want := []string{"/run/x/probe/sandcheck-probe", "run", "--params", `{"probe_dir":"/run/x/probe","x":"/run/x/probe/go"}`, "/.sandcheckx"}
	if !slices.Equal(rw, want) {
		t.Errorf("rewrite: %q, want %q", rw, want)
	}
}

func TestDeclared(t *testing.T) {
	c := &Config{Limits: targets.Limits{PidsLimit: 100, Memory: "256Mi", NoFile: 2048}}
	d := c.Declared()
	if d.Limits != (targets.DeclaredLimits{Pids: 100, MemoryBytes: 256 << 20, Nofile: 2048}) || d.Egress != "" || d.Env != nil {
		t.Errorf("declared %+v", d)
	}
}

// TestParamsFile: the parameters word becomes a file of the host's probe
// folder, read-only and written once, named at the box's probe mount; a
// command without parameters is left alone, and a name already taken (a
// second writer) is an error, never an overwrite.
func TestParamsFile(t *testing.T) {
	src := t.TempDir()
	sb := &Sandbox{id: "sc-wrap-test", probe: "/run/x/probe", probeSrc: src}
	doc := `{"schema":"s","probes":["a.b","c.d"]}`
	got, err := sb.paramsFile([]string{"/run/x/probe/sandcheck-probe", "run", "--token", "t", "--params", doc})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/run/x/probe/sandcheck-probe", "run", "--token", "t", "--params-file", "/run/x/probe/params/sc-wrap-test-1.json"}
	if !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	f := filepath.Join(src, ParamsFolder, "sc-wrap-test-1.json")
	b, err := os.ReadFile(f)
	if err != nil || string(b) != doc {
		t.Errorf("file holds %q (%v), want %q", b, err, doc)
	}
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("file mode %v (%v), want 0444", fi.Mode(), err)
	}
	list := []string{"/run/x/probe/sandcheck-probe", "list"}
	if got, err := sb.paramsFile(list); err != nil || !slices.Equal(got, list) {
		t.Errorf("list: %q %v, want it unchanged", got, err)
	}
	if err := os.WriteFile(filepath.Join(src, ParamsFolder, "sc-wrap-test-2.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.paramsFile([]string{"p", "run", "--params", doc}); err == nil {
		t.Error("a parameters file that already exists was written over")
	}
}
