package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// testImage is built locally (FROM scratch plus a static busybox).
const testImage = "sandcheck/runner:dev" // built by `make images`, which `make test` runs first

// testDNS is the resolver tests give sandboxes: Docker's own embedded
// resolver address, never reached (the tests use network none).
const testDNS = "127.0.0.11"

// labelTest marks every container a test creates, so a test can prove it left
// none behind.
const labelTest = "sandcheck.test"

// requireEngine skips, saying why, unless the test runs as root with a Docker
// engine that has testImage. CI provides all three.
func requireEngine(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (host-side teardown checks read every process's cgroup)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Ping(ctx); err != nil {
		t.Skipf("needs a Docker engine: %v", err)
	}
	if _, err := ImageDigest(ctx, testImage); err != nil {
		t.Skipf("needs the local image %s: %v", testImage, err)
	}
}

// requireRuntime skips unless the engine has the OCI runtime.
func requireRuntime(t *testing.T, name string) {
	t.Helper()
	if name == "runc" {
		return
	}
	cli := engineClient(t)
	info, err := cli.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatalf("reading engine info: %v", err)
	}
	if _, ok := info.Info.Runtimes[name]; !ok {
		t.Skipf("the engine has no %s runtime", name)
	}
}

func engineClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := Client(context.Background())
	if err != nil {
		t.Fatalf("engine client: %v", err)
	}
	return cli
}

var (
	probeOnce sync.Once
	probeDir  string
	probeErr  error
)

// fakeProbe returns a folder holding the test stand-in for sandcheck-probe
// (testdata/fakeprobe), built once, statically, for the whole package.
func fakeProbe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		probeDir, probeErr = os.MkdirTemp("", "sandcheck-fakeprobe-")
		if probeErr != nil {
			return
		}
		// Bind-mounted into the box, where the user may be 65534.
		if probeErr = os.Chmod(probeDir, 0o755); probeErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(probeDir, runners.ProbeBinary), "./testdata/fakeprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("building the fake probe: %v\n%s", err, out)
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if probeDir != "" {
		os.RemoveAll(probeDir)
	}
	os.Exit(code)
}

// hardened is the hardened reference's settings, with network none. Under
// runsc the pids limit is raised: the cgroup counts gVisor's own host threads
// (about 53 at idle here), so 64 kills the sandbox after a few execs.
func hardened(runtime string) targets.Docker {
	pids := int64(64)
	if runtime == "runsc" {
		pids = 256
	}
	return targets.Docker{
		Runtime:         runtime,
		User:            "65534:65534",
		CapDrop:         []string{"ALL"},
		Seccomp:         "default",
		NoNewPrivileges: true,
		ReadOnlyRootfs:  true,
		Tmpfs:           []targets.Tmpfs{{Path: "/tmp", Size: "16Mi"}, {Path: "/scratch", Size: "32Mi"}},
		PidsLimit:       pids,
		Memory:          "128Mi",
		CPUs:            1,
		Network:         "none",
		Env:             map[string]string{"TARGET_VAR": "target-value"},
	}
}

// weak is the weak reference's security settings, with network none.
func weak(runtime string) targets.Docker {
	return targets.Docker{
		Runtime:     runtime,
		CapAdd:      []string{"SYS_ADMIN"},
		Seccomp:     "unconfined",
		AppArmor:    "unconfined",
		SystemPaths: "unconfined",
		Network:     "none",
	}
}

// testSpec is a sandbox spec labelled with a fresh test label value, which it
// also returns.
func testSpec(t *testing.T, probes string) (runners.SandboxSpec, string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])
	t.Cleanup(func() { sweep(t, mark) })
	return runners.SandboxSpec{
		Name:         t.Name(),
		Labels:       map[string]string{labelTest: mark, "sandcheck.run": "test"},
		ProbeDir:     probes,
		DNS:          []string{testDNS},
		Env:          map[string]string{"SANDCHECK_TASK": "t1"},
		StartTimeout: 60 * time.Second,
	}, mark
}

// leftovers lists containers carrying the test label value.
func leftovers(t *testing.T, mark string) []string {
	t.Helper()
	res, err := engineClient(t).ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", labelTest+"="+mark),
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var out []string
	for _, c := range res.Items {
		out = append(out, fmt.Sprintf("%s %v (%s)", c.ID[:12], c.Names, c.State))
	}
	return out
}

// shims returns the running containerd shims, by pid, with the container ID
// each was started for.
func shims(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(argv[0]), "containerd-shim") {
			continue
		}
		for i := 0; i+1 < len(argv); i++ {
			if argv[i] == "-id" {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
				out[pid] = argv[i+1]
			}
		}
	}
	return out
}

// orphanShims lists the shims started since before whose container the
// engine no longer knows: what a start left running on the host.
func orphanShims(t *testing.T, before map[int]string) []string {
	t.Helper()
	// A shim the engine starts to clean up after a dead one lives for a
	// moment: only what is still there after a few seconds counts.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if left := newOrphanShims(t, before); len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

func newOrphanShims(t *testing.T, before map[int]string) []string {
	t.Helper()
	var out []string
	for pid, id := range shims(t) {
		if _, old := before[pid]; old {
			continue
		}
		_, err := engineClient(t).ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			out = append(out, fmt.Sprintf("shim %d for container %.12s", pid, id))
		}
	}
	return out
}

// sweep removes whatever a test left behind, and fails the test for it.
func sweep(t *testing.T, mark string) {
	cli := engineClient(t)
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", labelTest+"="+mark),
	})
	if err != nil {
		t.Errorf("listing containers: %v", err)
		return
	}
	for _, c := range res.Items {
		t.Errorf("container left behind: %s %v (%s)", c.ID[:12], c.Names, c.State)
		_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

// start starts a sandbox and closes it at cleanup.
func start(t *testing.T, cfg targets.Docker, spec runners.SandboxSpec) *Sandbox {
	t.Helper()
	r, err := New(cfg, testImage)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sb, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return sb.(*Sandbox)
}

// run execs argv and fails the test on an error.
func run(t *testing.T, sb runners.Sandbox, argv ...string) runners.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, argv)
	if err != nil {
		t.Fatalf("Exec %v: %v", argv, err)
	}
	return res
}
