package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// TestGVisorShowsEnvironToAll pins a real finding: Debian's runsc (2022)
// makes /proc/PID/environ readable by every user in the sandbox, with no
// ptrace check, so a root agent beside the task hands it its key. The
// gVisor reference therefore keeps no agent in the box (agent: none); with
// agent: root the same target must fail, with the host's proof that the
// holder's honeytoken was read. If a newer runsc fixes this, the test says so.
func TestGVisorShowsEnvironToAll(t *testing.T) {
	src, err := os.ReadFile("../fixtures/targets/hardened-gvisor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "agent: none") {
		t.Fatal("the gVisor reference no longer says agent: none; update this test")
	}
	target := filepath.Join(t.TempDir(), "gvisor-agent.yaml")
	body := strings.Replace(string(src), "agent: none", "agent: root", 1)
	body = strings.Replace(body, "seccomp: seccomp-default.json", "seccomp: "+mustAbs(t, "../fixtures/targets/seccomp-default.json"), 1)
	if err := os.WriteFile(target, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sandcheck(t, "run", "--target", target, "--quiet", "--probes", "secrets.proc-environ")
	rec := r.mustRecord(t)
	if r.code != 1 || len(rec.Results) != 1 {
		t.Fatalf("exit %d with %d results; want 1 (a failing criterion) and one result\n%s", r.code, len(rec.Results), r.stderr)
	}
	if got := rec.Effective(0); got != probes.Escaped {
		t.Errorf("secrets.proc-environ under runsc with a root agent: %s (%s); want escaped", got, rec.Results[0].Detail)
	}
	if it, ok := hostItem(rec.Results[0], evidence.SourceCanary, "honeytoken"); !ok || it.Indicates != probes.Escaped {
		t.Errorf("the host did not confirm the holder's honeytoken was read: %+v", rec.Results[0].Evidence)
	}
}

// TestWeakSecretsConfirmedByHost checks that every secrets probe with a
// harness-planted honeytoken escapes on the weak reference with the host's
// own confirmation, not only the probe's word.
func TestWeakSecretsConfirmedByHost(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--probes", "secrets.*")
	rec := r.mustRecord(t)
	n := 0
	for _, res := range rec.Results {
		spec, ok := probes.Lookup(res.Probe)
		if !ok {
			t.Fatalf("unknown probe %s in the record", res.Probe)
		}
		for _, h := range spec.Host {
			kind := map[string]string{"honeytoken": "honeytoken", "agent-socket": "agent-hit"}[h]
			if kind == "" {
				continue
			}
			n++
			if it, ok := hostItem(res, evidence.SourceCanary, kind); !ok || it.Indicates != probes.Escaped {
				t.Errorf("%s: no host confirmation (%s): %+v", res.Probe, kind, res.Evidence)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d host-confirmable secrets results; want every credential family", n)
	}
}
