//go:build cluster

// The kubernetes runner's end-to-end tests, on the real single-node cluster
// scripts/cluster/up.sh starts. Built only with -tags cluster: `make
// test-cluster` (and the cluster stage of .ci/run) brings the cluster up,
// runs them with SANDCHECK_KUBECONFIG set, and takes it down again.

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfig is the admin kubeconfig of the running cluster.
func kubeconfig(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("SANDCHECK_KUBECONFIG")
	if kc == "" {
		t.Fatal("SANDCHECK_KUBECONFIG is not set: run these tests through `make test-cluster`")
	}
	return kc
}

// kubectl runs the cluster's kubectl as the admin.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := os.Getenv("CLUSTER_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../bin/cluster")
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig(t)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// assertClusterClean fails when a namespace the runs made is still there
// and not being deleted, or any pod of it remains outside a terminating
// namespace.
func assertClusterClean(t *testing.T) {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string `json:"name"`
				DeletionTimestamp string `json:"deletionTimestamp"`
			} `json:"metadata"`
		} `json:"items"`
	}
	out := kubectl(t, "get", "namespaces", "-l", "app.kubernetes.io/managed-by=sandcheck", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("namespaces: %v", err)
	}
	for _, n := range list.Items {
		if n.Metadata.DeletionTimestamp == "" {
			t.Errorf("namespace %s survived its run", n.Metadata.Name)
		}
	}
}

// writeTarget writes a target file next to the fixtures (so their relative
// paths hold) and removes it at the end.
func writeTarget(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join("..", "fixtures", "kubernetes", "test-"+name+".yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return filepath.Join("fixtures", "kubernetes", "test-"+name+".yaml")
}

func TestKubernetesHardenedRunc(t *testing.T) {
	kubeconfig(t)
	r := sandcheck(t, "run", "--target", "fixtures/kubernetes/hardened.yaml", "--trace=false", "-v")
	rec := r.mustRecord(t)
	if r.code == 2 {
		t.Fatalf("harness error (exit 2):\n%s\n%s", r.stdout, r.stderr)
	}
	if rec.Runner != "kubernetes" || rec.Runtime != "runc" {
		t.Errorf("runner %q runtime %q, want kubernetes runc", rec.Runner, rec.Runtime)
	}
	ran := 0
	for _, res := range rec.Results {
		if res.Outcome != "not-tested" {
			ran++
		}
	}
	t.Logf("%d results, %d carried out, exit %d", len(rec.Results), ran, r.code)
	if ran == 0 {
		t.Fatal("no probe was carried out through the kubernetes runner")
	}
	for _, s := range rec.Sandboxes {
		if s.View == nil || s.View.Runtime != "runc" || !s.View.ReadOnlyRootfs || s.View.User != "65534:65534" {
			t.Errorf("sandbox %s: runtime view %+v", s.ID, s.View)
		}
		if len(s.Teardown) > 0 {
			t.Errorf("sandbox %s left %v", s.ID, s.Teardown)
		}
	}
	assertClusterClean(t)
}

func TestKubernetesFleetPoolByPool(t *testing.T) {
	kubeconfig(t)
	r := sandcheck(t, "run", "--target", "fixtures/kubernetes/fleet.yaml", "--trace=false")
	if r.code == 2 {
		t.Fatalf("harness error (exit 2):\n%s\n%s", r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(r.out, "fleet.json"))
	if err != nil {
		t.Fatalf("fleet.json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	var fleet struct {
		Pools []struct {
			Pool, Verdict string
			Results       int
			Seconds       float64
		}
	}
	if err := json.Unmarshal(b, &fleet); err != nil {
		t.Fatal(err)
	}
	if len(fleet.Pools) != 2 || fleet.Pools[0].Pool != "runc" || fleet.Pools[1].Pool != "gvisor" {
		t.Fatalf("pools: %+v", fleet.Pools)
	}
	for _, p := range fleet.Pools {
		t.Logf("pool %s: %s, %d results in %.1fs", p.Pool, p.Verdict, p.Results, p.Seconds)
		if p.Results == 0 {
			t.Errorf("pool %s has no results", p.Pool)
		}
		var rec struct {
			Runtime string `json:"runtime"`
		}
		rb, err := os.ReadFile(filepath.Join(r.out, p.Pool, "run.json"))
		if err != nil || json.Unmarshal(rb, &rec) != nil {
			t.Fatalf("pool %s run.json: %v", p.Pool, err)
		}
		want := map[string]string{"runc": "runc", "gvisor": "runsc"}[p.Pool]
		if rec.Runtime != want {
			t.Errorf("pool %s ran under %q, want %q", p.Pool, rec.Runtime, want)
		}
	}
	if !strings.Contains(r.stdout, "== pool runc") || !strings.Contains(r.stdout, "== pool gvisor") {
		t.Errorf("stdout does not report pool by pool:\n%s", r.stdout)
	}
	assertClusterClean(t)
}

func TestKubernetesBadInput(t *testing.T) {
	kc := kubeconfig(t)
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable.kubeconfig")
	os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600)
	badTemplate := filepath.Join(dir, "bad-pod.yaml")
	os.WriteFile(badTemplate, []byte("apiVersion: v1\nkind: Pod\nspec: [\n"), 0o644)
	base := func(kubeconfig, template, image string) string {
		return "schema: sandcheck.dev/target/v1\nname: k8s-bad\nrunner: kubernetes\nimage: " + image +
			"\nprofile: no-network-transform\nkubernetes:\n  kubeconfig: " + kubeconfig + "\n  pod_template: " + template +
			"\n  start_timeout: 40s\n"
	}
	cases := []struct{ name, target, want string }{
		{"unreachable API server", base(unreachable, "pod-hardened.yaml", "sandcheck/runner:dev"), "does not answer"},
		{"template does not parse", base(kc, badTemplate, "sandcheck/runner:dev"), badTemplate},
		{"image not on the node", base(kc, "pod-hardened.yaml", "sandcheck.local/absent:1"), "ErrImageNeverPull"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTarget(t, strings.ReplaceAll(tc.name, " ", "-"), tc.target)
			r := sandcheck(t, "run", "--target", p, "--probes", "fingerprint.*", "--trace=false")
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("output does not name %q:\n%s\n%s", tc.want, r.stdout, r.stderr)
			}
		})
	}
	assertClusterClean(t)
}

// BenchmarkKubernetesCatalogPerPool runs the full catalog through the
// cluster once per pool of fixtures/kubernetes/fleet.yaml (runc, gVisor),
// each pool alone, and reports each pool's wall time beside its floor (60 s
// once the cluster is up); then the fleet as one run, both pools at once,
// whose per-pool times it reports without a floor: on this single 2-core
// node the pools share the cores a real fleet's pools would not.
func BenchmarkKubernetesCatalogPerPool(b *testing.B) {
	kc := os.Getenv("SANDCHECK_KUBECONFIG")
	bin := os.Getenv("SANDCHECK_BIN")
	if kc == "" || bin == "" {
		b.Fatal("SANDCHECK_KUBECONFIG and SANDCHECK_BIN must be set (make bench-cluster)")
	}
	fixtures, err := filepath.Abs("../fixtures/kubernetes")
	if err != nil {
		b.Fatal(err)
	}
	run := func(target string) (time.Duration, []byte) {
		out := b.TempDir()
		cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", target, "--out-dir", out, "--quiet", "--trace=false")
		cmd.Dir = ".."
		t0 := time.Now()
		_ = cmd.Run() // the verdict is not the benchmark's business; the records are
		wall := time.Since(t0)
		fb, err := os.ReadFile(filepath.Join(out, "fleet.json"))
		if err != nil {
			fb, err = os.ReadFile(filepath.Join(out, "run.json"))
		}
		if err != nil {
			b.Fatalf("%s: no record: %v", target, err)
		}
		return wall, fb
	}
	for i := 0; i < b.N; i++ {
		for _, pool := range []struct{ name, class string }{{"runc", "runc"}, {"gvisor", "gvisor"}} {
			target := filepath.Join(b.TempDir(), pool.name+".yaml")
			body := fmt.Sprintf("schema: sandcheck.dev/target/v1\nname: k8s-%s\nrunner: kubernetes\nimage: sandcheck/runner:dev\n"+
				"profile: no-network-transform\nkubernetes:\n  kubeconfig: %s\n  pod_template: %s/pod-hardened.yaml\n"+
				"  namespace: %s/namespace-hardened.yaml\n  pools:\n  - {name: %s, runtime_class: %s}\n",
				pool.name, kc, fixtures, fixtures, pool.name, pool.class)
			if err := os.WriteFile(target, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			_, rb := run(target)
			var rec struct {
				Results []json.RawMessage
				Timing  struct {
					Total float64 `json:"total_seconds"`
				}
				Verdict struct{ Verdict string }
			}
			if err := json.Unmarshal(rb, &rec); err != nil {
				b.Fatal(err)
			}
			b.Logf("pool %-7s alone: catalog wall %6.1f s (floor 60 s), %d results", pool.name, rec.Timing.Total, len(rec.Results))
			b.ReportMetric(rec.Timing.Total, pool.name+"-s")
			if rec.Timing.Total > 60 || len(rec.Results) == 0 {
				b.Errorf("pool %s: %d results in %.1f s (floor 60 s)", pool.name, len(rec.Results), rec.Timing.Total)
			}
		}
		wall, fb := run("fixtures/kubernetes/fleet.yaml")
		var fleet struct {
			Pools []struct {
				Pool    string
				Verdict string
				Results int
				Seconds float64
			}
		}
		if err := json.Unmarshal(fb, &fleet); err != nil {
			b.Fatal(err)
		}
		for _, p := range fleet.Pools {
			b.Logf("pool %-7s in the fleet (both pools at once on this node): %6.1f s, %d results, %s", p.Pool, p.Seconds, p.Results, p.Verdict)
			if p.Verdict == "harness-error" {
				b.Errorf("pool %s in the fleet: harness error", p.Pool)
			}
		}
		b.Logf("fleet wall %.1f s", wall.Seconds())
		b.ReportMetric(wall.Seconds(), "fleet-s")
	}
}
