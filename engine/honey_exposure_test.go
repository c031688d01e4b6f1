package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
)

// The exposure fact names a planted file only where a bind mount of it, or
// of a folder above it, puts it in the box; it indicates nothing itself.
func TestCredsExposureFollowsMountSources(t *testing.T) {
	dir := t.TempDir()
	c, err := plantCreds(dir)
	if err != nil {
		t.Fatal(err)
	}
	home, sa := filepath.Join(dir, CredHomeDir), filepath.Join(dir, ServiceAccountDir)
	for _, tc := range []struct {
		name   string
		probe  string
		mounts []runners.Mount
		want   string // a part of the summary; "" for no item
	}{
		{"the home as root's", "secrets.netrc", []runners.Mount{{Type: "bind", Source: home, Destination: "/root"}}, "at /root/.netrc (read-write)"},
		{"the run folder above it", "secrets.ssh-keys", []runners.Mount{{Type: "bind", Source: dir + "/", Destination: "/run-dir", ReadOnly: true}}, "at /run-dir/home/.ssh/id_ed25519 (read-only)"},
		{"the token folder", "metadata.k8s-service-account", []runners.Mount{{Type: "bind", Source: sa, Destination: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}, "service-account token at /var/run/secrets/kubernetes.io/serviceaccount/token (read-only)"},
		{"a sibling folder with a shared prefix", "secrets.netrc", []runners.Mount{{Type: "bind", Source: home + "x", Destination: "/root"}}, ""},
		{"another probe's folder", "metadata.k8s-service-account", []runners.Mount{{Type: "bind", Source: home, Destination: "/root"}}, ""},
		{"a tmpfs", "secrets.netrc", []runners.Mount{{Type: "tmpfs", Source: home, Destination: "/root"}}, ""},
		{"a relative source", "secrets.netrc", []runners.Mount{{Type: "bind", Source: "home", Destination: "/root"}}, ""},
		{"a secret of the environment only", "secrets.scoped-key", []runners.Mount{{Type: "bind", Source: dir, Destination: "/x"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.exposure(tc.probe, &runners.RuntimeView{Mounts: tc.mounts})
			if tc.want == "" {
				if ok {
					t.Fatalf("an exposure item without the file in the box: %+v", it)
				}
				return
			}
			if !ok || it.Kind != "honeytoken-exposed" || it.Indicates != "" || !strings.Contains(it.Summary, tc.want) {
				t.Fatalf("got %+v (%t), want a neutral honeytoken-exposed item naming %q", it, ok, tc.want)
			}
		})
	}
	if _, ok := c.exposure("secrets.netrc", nil); ok {
		t.Error("an exposure item without a runtime view")
	}
}
