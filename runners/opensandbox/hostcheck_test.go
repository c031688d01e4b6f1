package opensandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// TestHostCheckFindsSidecar: with a network policy, upstream's egress
// sidecar holds the sandbox's network and its 0.0.0.0:<port> binding of
// 44772, labelled only opensandbox.io/egress-sidecar-for (server
// services/docker/networking.py 374-404), while the sandbox container has
// none. The host check finds the sidecar by that label and fails the
// sandbox; found by opensandbox.io/id alone it would read "no host address".
func TestHostCheckFindsSidecar(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     fixture.Config
		policy  bool
		want    probes.Outcome
		summary string
	}{
		{"sidecar-all", fixture.Config{PublishExecd: "all", Egress: egressBin}, true, probes.Escaped, "sandbox-egress-"},
		{"sandbox-all", fixture.Config{PublishExecd: "all"}, false, probes.Escaped, " 0.0.0.0:"},
		{"sidecar-gateway", fixture.Config{PublishExecd: "gateway", Egress: egressBin}, true, probes.Blocked, "only on named host addresses"},
		{"sidecar-none", fixture.Config{Egress: egressBin}, true, probes.Blocked, "on no host address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, url := startServer(t, c.cfg)
			cfg := testCfg(url)
			if c.policy {
				cfg.NetworkPolicy = &targets.OpenSandboxPolicy{DefaultAction: "deny"}
			}
			r, err := New(cfg, testImage, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "hostcheck-" + c.name, ProbeDir: probeDir(t), StartTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			f, err := sb.(*Sandbox).HostCheck(context.Background(), "execd-published")
			if err != nil {
				t.Fatal(err)
			}
			if f.Indicates != c.want || !strings.Contains(f.Summary, c.summary) {
				t.Errorf("host check %s: %s (%v), want %s saying %q", f.Indicates, f.Summary, f.Data, c.want, c.summary)
			}
			if c.policy && !strings.Contains(f.Data["checked"], "sandbox-egress-") {
				t.Errorf("the check did not read the sidecar: checked %q", f.Data["checked"])
			}
		})
	}
}
