package targets

import (
	"errors"
	"strings"
	"testing"
)

func TestReferenceRunnerTargetsLoad(t *testing.T) {
	for _, f := range []string{"bwrap-hardened.yaml", "bwrap-weak.yaml", "process.yaml"} {
		tg, err := Load("../fixtures/targets/" + f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if tg.Bwrap == nil && tg.Section == nil {
			t.Errorf("%s: neither bwrap nor process section decoded", f)
		}
	}
}

func TestBwrapValidation(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nprofile: no-network-transform\n"
	for _, tc := range []struct{ name, body, want string }{
		{"bwrap without section", "runner: bwrap\n", "needs a bwrap: section"},
		{"unknown namespace", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  unshare: [mnt]\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: harness\n", "$.bwrap.unshare[0]"},
		{"unprivileged without userns", "runner: bwrap\nbwrap:\n  host_user: \"65534\"\n  unshare: [net]\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: none\n", "needs the user namespace"},
		{"no /tmp", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  network: harness\n", "must include /tmp"},
		{"none without net", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  network: none\n", "none needs net"},
		{"bad seccomp", "runner: bwrap\nbwrap:\n  host_user: \"0\"\n  tmpfs: [{path: /tmp, size: 1Mi}]\n  seccomp: default\n  network: harness\n", "$.bwrap.seccomp"},
	} {
		_, err := Parse("t.yaml", []byte(head+tc.body))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
