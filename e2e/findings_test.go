package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestGVisorExecLosesSeccomp pins a real finding: Debian's runsc (2022)
// applies the OCI seccomp profile to a sandbox's first process only, so a
// task started with `docker exec` runs unfiltered. The same hardened gVisor
// target that passes with launch: task must fail with launch: exec, and the
// tool must say why. If a newer runsc fixes this, the test tells us.
func TestGVisorExecLosesSeccomp(t *testing.T) {
	src, err := os.ReadFile("../fixtures/targets/hardened-gvisor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "launch: task") {
		t.Fatal("the gVisor reference no longer uses launch: task; update this test")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "gvisor-exec.yaml")
	body := strings.Replace(string(src), "launch: task", "launch: exec", 1)
	body = strings.Replace(body, "seccomp: seccomp-default.json", "seccomp: "+mustAbs(t, "../fixtures/targets/seccomp-default.json"), 1)
	if err := os.WriteFile(target, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sandcheck(t, "run", "--target", target, "--quiet", "--probes", "privilege.seccomp")
	rec := r.mustRecord(t)
	if r.code != 1 || len(rec.Results) != 1 {
		t.Fatalf("exit %d with %d results; want 1 (a failing criterion) and one result\n%s", r.code, len(rec.Results), r.stderr)
	}
	if got := rec.Effective(0); got != probes.Escaped {
		t.Errorf("privilege.seccomp under runsc with docker exec: %s (%s); want escaped: the exec'd process has no seccomp filter", got, rec.Results[0].Detail)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
