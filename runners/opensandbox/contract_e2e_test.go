package opensandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// contractCalls are the documented operations a recorded run must reach:
// every call the runner makes, so a recorder that missed some, or a run
// that skipped some, cannot pass by judging less.
var contractCalls = []string{
	"GET /health",
	"sandbox-lifecycle.yml POST /sandboxes",
	"sandbox-lifecycle.yml GET /sandboxes/{sandboxId}",
	"sandbox-lifecycle.yml DELETE /sandboxes/{sandboxId}",
	"sandbox-lifecycle.yml GET /sandboxes/{sandboxId}/endpoints/{port}",
	"execd-api.yaml GET /ping",
	"execd-api.yaml POST /command",
	"execd-api.yaml DELETE /command",
	"execd-api.yaml GET /command/status/{id}",
	"execd-api.yaml POST /files/upload",
}

// TestContractRecorded records everything the runner sends and reads in a
// run against the stand-in with upstream's real execd (an API key, an execd
// token, a lifetime, harness labels too long for a label value, env) and
// holds each exchange to upstream's documents (contract_test.go): health,
// create, polling, the endpoint, execd's ping, commands (output, an exit
// code, an interrupted one, a background one and its status), uploads and
// the delete. The bare form runs with a network policy (the egress
// sidecar), the proxy form (upstream's bridge mode, /proxy/44772) without;
// the bare form also loses a create, so the runner's sweep lists by
// metadata. Each form then puts two creates upstream refuses on the wire (no
// resourceLimits; a 64-character label value) and requires the same judge to
// refuse them.
func TestContractRecorded(t *testing.T) {
	for _, form := range []string{"bare", "proxy"} {
		t.Run(form, func(t *testing.T) { contractRun(t, form) })
	}
}

func contractRun(t *testing.T, form string) {
	const key, token = "contract-key-3b1e", "contract-token-77aa"
	srvCfg := fixture.Config{APIKey: key, ExecdToken: token, EndpointForm: form}
	cfgMod := func(*targets.OpenSandbox) {}
	if form == "bare" {
		if _, err := os.Stat(egressBin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI lays shared/ beside the checkout, but the upstream egress is not at %s: %v", egressBin, err)
			}
			t.Skipf("needs the upstream egress at %s (or set SANDCHECK_OPENSANDBOX_DIR): %v", egressBin, err)
		}
		srvCfg.Egress = egressBin
		cfgMod = func(c *targets.OpenSandbox) {
			c.NetworkPolicy = &targets.OpenSandboxPolicy{DefaultAction: "deny",
				Egress: []targets.OpenSandboxRule{{Action: "allow", Target: "pypi.org"}}}
		}
	}
	_, url := startServer(t, srvCfg)
	cfg := testCfg(url)
	cfg.Timeout = 600
	cfgMod(&cfg)
	r, err := New(cfg, testImage, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := r.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	sbi, err := r.Start(ctx, runners.SandboxSpec{Name: "contract-" + form, ProbeDir: probeDir(t), StartTimeout: time.Minute,
		Labels: map[string]string{"sandcheck.task": "a task named at more length than a Kubernetes label value allows"},
		Env:    map[string]string{"SANDCHECK_MARK": "contract"}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	sb := sbi.(*Sandbox)
	defer sb.Close(context.Background())
	for argv, want := range map[string]int{"echo out; echo err >&2": 0, "exit 3": 3} {
		if res, err := sb.Exec(ctx, []string{"sh", "-c", argv}); err != nil || res.ExitCode != want {
			t.Errorf("%s: exit %d, %v; want %d", argv, res.ExitCode, err, want)
		}
	}
	// A caller that gives up interrupts the command (DELETE /command?id=).
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = sb.Exec(short, []string{"sh", "-c", "echo started; sleep 30"})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command outliving its context: %v, want the deadline", err)
	}
	if err := sb.Spawn(ctx, []string{"sleep", "20"}, "0", []string{"K=v"}); err != nil {
		t.Errorf("spawn: %v", err)
	}
	host := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(host, []byte("contract\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.CopyIn(ctx, host, "/tmp/contract.txt"); err != nil {
		t.Errorf("copy in: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	judge(t, url, rec, contractCalls)
	contractCatches(t, url, key)

	if form != "bare" {
		return
	}
	// A create that fails sends the sweep's list by metadata.
	_, url2 := startServer(t, fixture.Config{APIKey: key, Faults: map[string]string{"create": "500"}})
	r2, err := New(testCfg(url2), testImage, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := record(t, r2)
	if sb, err := r2.Start(ctx, runners.SandboxSpec{Name: "contract sweep: a name no label value holds as it is, at length", ProbeDir: t.TempDir(), StartTimeout: 10 * time.Second}); err == nil {
		sb.Close(context.Background())
		t.Fatal("start succeeded against a create that fails")
	}
	judge(t, url2, rec2, []string{"sandbox-lifecycle.yml POST /sandboxes", "sandbox-lifecycle.yml GET /sandboxes"})
}

// judge holds a recorder's exchanges to the contract and requires the
// operations named in must among them.
func judge(t *testing.T, lifecycleURL string, rec *recorder, must []string) {
	t.Helper()
	c := newContract(t, lifecycleURL)
	exs := rec.exchanges(t)
	if probs := c.check(exs); len(probs) > 0 {
		t.Errorf("%d of %d exchanges break upstream's documented contract:\n%s", len(probs), len(exs), strings.Join(probs, "\n"))
	}
	for _, op := range must {
		if c.seen[op] == 0 {
			t.Errorf("the run never reached %s; seen: %v", op, c.seen)
		}
	}
	t.Logf("%d exchanges judged; operations: %v", len(exs), c.seen)
}

// contractCatches is the recorded path's own negative control: requests the
// runner must never send, put on the wire through the same recorder, are
// refused by the same judge for the reason named.
func contractCatches(t *testing.T, url, key string) {
	t.Helper()
	r, err := New(testCfg(url), testImage, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noLimits := r.request(runners.SandboxSpec{Name: "contract-no-limits"})
	noLimits.ResourceLimits = nil
	longLabel := r.request(runners.SandboxSpec{Name: "contract-long-label"})
	longLabel.Metadata["sandcheck.task"] = strings.Repeat("x", 64)
	for _, req := range []createRequest{noLimits, longLabel} {
		if info, err := r.api.create(ctx, req); err == nil {
			(&Sandbox{id: info.ID, api: r.api, log: r.log}).Close(ctx)
			t.Errorf("the stand-in accepted a create upstream refuses: %+v", req)
		}
	}
	probs := strings.Join(newContract(t, url).check(rec.exchanges(t)), "\n")
	for _, want := range []string{"no resourceLimits", "response 422: status is not supported", "not a Kubernetes label value"} {
		if !strings.Contains(probs, want) {
			t.Errorf("the recorded contract missed %q in known-bad creates; it said:\n%s", want, probs)
		}
	}
}
