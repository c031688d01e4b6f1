package impl

import (
	"context"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

func TestRuntimeClass(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    runtimeFacts
		want string
	}{
		{"gvisor", runtimeFacts{release: "4.4.0", version: "#1 SMP Sun Jan 10 15:06:54 PST 2016", dockerEnv: true}, "gvisor"},
		{"old host kernel 4.4.0 is not gvisor", runtimeFacts{release: "4.4.0", version: "#42-Ubuntu SMP", dockerEnv: true}, "runc"},
		{"bubblewrap", runtimeFacts{release: "6.1.0", pid1Comm: "bwrap"}, "bubblewrap"},
		{"docker", runtimeFacts{release: "6.1.0", pid1Comm: "sandcheck-probe", dockerEnv: true}, "runc"},
		{"podman", runtimeFacts{release: "6.1.0", containerEnv: true}, "runc"},
		{"kubernetes cgroup", runtimeFacts{release: "6.1.0", cgroup: "0::/kubepods/besteffort/pod1/abc"}, "runc"},
		{"host", runtimeFacts{release: "6.1.0", pid1Comm: "systemd", cgroup: "0::/user.slice/session-1.scope"}, "none"},
	} {
		if got, why := runtimeClass(tt.f); got != tt.want {
			t.Errorf("%s: runtimeClass = %s (%s), want %s", tt.name, got, why, tt.want)
		}
	}
}

func TestFingerprintRuntimeIsInformational(t *testing.T) {
	r := fingerprintRuntime(context.Background(), probes.Params{})
	if r.Outcome != probes.NotApplicable || r.Evidence["runtime_class"] == "" || r.Evidence["kernel"] == "" {
		t.Errorf("fingerprint: %s %s %v", r.Outcome, r.Detail, r.Evidence)
	}
	if s, ok := probes.Lookup("fingerprint.runtime"); !ok || !s.Informational {
		t.Error("fingerprint.runtime must be an informational catalog entry")
	}
}
