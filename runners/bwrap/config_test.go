package bwrap

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/targets"
)

// The bwrap section is checked here, once, and its problems name file,
// line and field as every target error does.
func TestSectionValidation(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nprofile: no-network-transform\n"
	for _, tc := range []struct{ name, body, want string }{
		{"without section", "runner: bwrap\n", "t.yaml:4:9: $.runner: runner bwrap needs a bwrap: section"},
		{"unknown namespace", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  unshare: [mnt]\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: harness\n", "t.yaml:7:13: $.bwrap.unshare[0]: \"mnt\" is not one of"},
		{"unprivileged without userns", "runner: bwrap\nbwrap:\n  host_user: \"65534\"\n  unshare: [net]\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: none\n", "$.bwrap.unshare: an unprivileged host_user needs the user namespace"},
		{"no /tmp", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  network: harness\n", "$.bwrap.tmpfs: must include /tmp"},
		{"none without net", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: none\n", "none needs net"},
		{"bad seccomp", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  seccomp: default\n  network: harness\n", "$.bwrap.seccomp"},
		{"CAP_ prefix", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  cap_add: [CAP_NET_RAW]\n  network: harness\n", "$.bwrap.cap_add[0]: \"CAP_NET_RAW\" is not a capability name"},
		{"hostname without uts", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  hostname: \"h-${SANDCHECK_BOGUS}\"\n  network: harness\n", "$.bwrap.hostname: needs uts"},
		{"hostname variable", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  unshare: [uts]\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  hostname: \"h-${SANDCHECK_BOGUS}\"\n  network: harness\n", "$.bwrap.hostname: ${SANDCHECK_BOGUS} is not one of"},
		{"bad bind", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  binds: [{source: a, target: /.sandcheck/x}]\n  network: harness\n", "$.bwrap.binds[0].target: /.sandcheck/x is reserved"},
		{"tasks disagree", "runner: bwrap\ntasks: {launch: exec}\nbwrap:\n  host_user: \"0\"\n  launch: task\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: harness\n", "$.tasks.launch: \"exec\" disagrees with $.bwrap.launch \"task\""},
		{"unknown key", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  bogus: 1\n", "t.yaml:7:3: unknown field \"bogus\""},
	} {
		_, err := targets.Parse("t.yaml", []byte(head+tc.body))
		if err == nil || !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// What bwrap declares in the runner-neutral terms the engine reads.
func TestDeclared(t *testing.T) {
	c := &Config{Limits: targets.Limits{PidsLimit: 100, Memory: "256Mi", NoFile: 2048}, Launch: "task",
		Binds: []targets.Mount{{Source: "s", Target: "/s"}}, Hostname: "h", Env: map[string]string{"A": "b"}}
	d := c.Declared()
	if d.Limits != (targets.DeclaredLimits{Pids: 100, MemoryBytes: 256 << 20, Nofile: 2048}) {
		t.Errorf("limits %+v", d.Limits)
	}
	if d.Tasks.Launch != "task" || len(d.Mounts) != 1 || d.Hostname != "" || d.Env != nil || d.Egress != "" {
		t.Errorf("declared %+v", d)
	}
}

// The schema fragment's unshare vocabulary is the parser's.
func TestSchemaNamespaces(t *testing.T) {
	var frag struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(schema, &frag); err != nil {
		t.Fatal(err)
	}
	if got := frag.Defs["bwrap"].Properties["unshare"].Items.Enum; !slices.Equal(got, Namespaces) {
		t.Errorf("schema unshare enum %v, Namespaces %v", got, Namespaces)
	}
}
