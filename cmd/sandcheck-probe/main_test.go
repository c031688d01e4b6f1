package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/internal/lease"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/probes/impl"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildProbe builds the binary once, the way the harness does (static, no
// cgo).
func buildProbe(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the probe binary")
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "sandcheck-probe-test-"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "sandcheck-probe")
		cmd := exec.Command(gobin, "build", "-o", builtBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the probe: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// unsafeOnHost are the probes never run outside a sandbox: the bombs, and the
// marker planting (its check phase is safe and runs).
var unsafeOnHost = []string{"resources.fork-bomb", "resources.memory"}

func TestBinary(t *testing.T) {
	bin := buildProbe(t)
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running %v: %v", args, err)
		}
		return out.String(), errb.String(), code
	}

	t.Run("list is the catalog", func(t *testing.T) {
		out, _, code := run("list")
		var want []string
		for _, s := range probes.Catalog() {
			want = append(want, s.ID)
		}
		if got := strings.Fields(out); code != 0 || !slices.Equal(got, want) {
			t.Errorf("list exit %d, ids %v; want %v", code, got, want)
		}
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		seccomp := []string{"privilege.seccomp"}
		tooMany := make([]string, probes.MaxResults+1)
		for i := range tooMany {
			tooMany[i] = "privilege.seccomp"
		}
		for _, args := range [][]string{
			{"run", "--params", wire(t, probes.Params{Probes: []string{"host.nope"}})},
			{"run", "--params", wire(t, probes.Params{Probes: []string{"privilege.seccomp", "host.nope"}})},
			{"run", "--params", wire(t, probes.Params{})},
			{"run", "--params", wire(t, probes.Params{Probes: tooMany})},
			// The probes travel in the parameters only: a word after the
			// flags is refused, alone or beside the list.
			{"run", "--params", wire(t, probes.Params{}), "privilege.seccomp"},
			{"run", "--params", wire(t, probes.Params{Probes: seccomp}), "privilege.seccomp"},
			{"run", "privilege.seccomp"},
			{"run", "--token", "t", "privilege.seccomp"},
			{"run", "--params", `{"token":"t","probes":["privilege.seccomp"]}`},
			{"run", "--params", strings.Replace(wire(t, probes.Params{Probes: seccomp}), "v1", "v9", 1)},
			{"run", "--params", strings.Replace(wire(t, probes.Params{Token: "t", Probes: seccomp}), `"token"`, `"tokn"`, 1)},
			{"run", "--params", strings.Replace(wire(t, probes.Params{Probes: seccomp}), `"probes"`, `"probe"`, 1)},
			{"run", "--token", "a b", "--params", wire(t, probes.Params{Token: "a b", Probes: seccomp})},
			{"run", "--token", "t2", "--params", wire(t, probes.Params{Token: "t1", Probes: seccomp})},
			{"run", "--params", wire(t, probes.Params{Phase: "later", Probes: seccomp})},
			{"run", "--params", wire(t, probes.Params{OutsideAddr: "example.com", Probes: seccomp})},
			{"frobnicate"},
			{},
		} {
			out, stderr, code := run(args...)
			if code != 2 || out != "" || stderr == "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, nothing, a message", args, code, out, stderr)
			}
		}
	})

	t.Run("parameters from a file", func(t *testing.T) {
		dir := t.TempDir()
		doc := wire(t, probes.Params{Token: "t-file", Probes: []string{"privilege.root-uid", "privilege.seccomp"}})
		good := filepath.Join(dir, "p.json")
		if err := os.WriteFile(good, []byte(doc), 0o444); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := run("run", "--token", "t-file", "--params-file", good)
		res, err := probes.ParseResults(strings.NewReader(out))
		if code != 0 || err != nil || len(res) != 2 || res[0].Probe != "privilege.root-uid" || res[1].Probe != "privilege.seccomp" {
			t.Fatalf("exit %d, results %+v (%v), stderr %s; want the two probes the file lists", code, res, err, stderr)
		}
		link := filepath.Join(dir, "link.json")
		fifo := filepath.Join(dir, "fifo.json")
		big := filepath.Join(dir, "big.json")
		if err := os.Symlink(good, link); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(big, []byte(doc[:len(doc)-1]+strings.Repeat(" ", probes.MaxParamsBytes)+"}"), 0o444); err != nil {
			t.Fatal(err)
		}
		for name, args := range map[string][]string{
			"a link":            {"--params-file", link},
			"a FIFO":            {"--params-file", fifo},
			"over the bound":    {"--params-file", big},
			"missing":           {"--params-file", filepath.Join(dir, "none.json")},
			"and --params both": {"--params-file", good, "--params", doc},
			"and a word after":  {"--params-file", good, "privilege.seccomp"},
		} {
			out, stderr, code := run(append([]string{"run", "--token", "t-file"}, args...)...)
			if code != 2 || out != "" || stderr == "" {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2, nothing, a message", name, code, out, stderr)
			}
		}
	})

	t.Run("safe probes on the host", func(t *testing.T) {
		imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("canary-role\n"))
		}))
		defer imds.Close()
		var ids []string
		for _, id := range impl.IDs() {
			// The teardown probes plant what should outlive their sandbox
			// (sibling containers through an engine socket, daemons, files):
			// on the host itself they would outlive the test.
			if !slices.Contains(unsafeOnHost, id) && !strings.HasPrefix(id, "teardown.") {
				ids = append(ids, id)
			}
		}
		out, stderr, code := run("run", "--token", "t-host", "--params", wire(t, probes.Params{Token: "t-host", Marker: "m-host-check", Phase: "check",
			ProbeDir: filepath.Dir(bin), MetadataAddr: strings.TrimPrefix(imds.URL, "http://"), Probes: ids}))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		res, err := probes.ParseResults(strings.NewReader(out))
		if err != nil {
			t.Fatalf("output rejected: %v\n%s", err, out)
		}
		if len(res) != len(ids) {
			t.Fatalf("%d results for %d probes", len(res), len(ids))
		}
		for i, r := range res {
			if r.Probe != ids[i] {
				t.Errorf("result %d is %s, want %s", i, r.Probe, ids[i])
			}
			t.Logf("%-30s %-13s %s", r.Probe, r.Outcome, r.Detail)
		}
		if res[0].Outcome != probes.Escaped {
			t.Errorf("imdsv1 against a loopback canary: %s, want escaped", res[0].Outcome)
		}
	})
}

func TestHoldExitsOnSIGTERM(t *testing.T) {
	bin := buildProbe(t)
	cmd := exec.Command(bin, "hold", "--max", "1m")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let it install its handlers
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hold exited with %v, want 0", err)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("hold ignored SIGTERM")
	}
}

func TestHoldExitsAfterMax(t *testing.T) {
	bin := buildProbe(t)
	start := time.Now()
	out, err := exec.Command(bin, "hold", "--max", "200ms").CombinedOutput()
	if err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("hold --max 200ms: %v after %s: %s", err, time.Since(start), out)
	}
}

// TestHoldFollowsItsLease (issue 40 item 5): a holder tied to a lease that
// the harness keeps rewriting (lease.Keep) outlives its TTL many times
// over, with no --max, and ends within about a TTL once the rewriting
// stops, as it does when the run's process dies; one whose lease file is
// missing from the start ends after a TTL too.
func TestHoldFollowsItsLease(t *testing.T) {
	bin := buildProbe(t)
	const ttl = 400 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, probes.LeaseFile)
	release, err := lease.Keep(dir, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var se bytes.Buffer
	cmd := exec.Command(bin, "hold", "--max", "0", "--lease", path, "--lease-ttl", ttl.String())
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	select {
	case err := <-done:
		t.Fatalf("the holder ended while its lease was kept, after less than %s (%v): %s", 10*ttl, err, se.String())
	case <-time.After(10 * ttl):
	}
	release()
	stopped := time.Now()
	select {
	case err := <-done:
		took := time.Since(stopped)
		if err != nil || !strings.Contains(se.String(), "did not change") {
			t.Errorf("the holder whose lease stopped: %v: %s", err, se.String())
		}
		if took < ttl/2 {
			t.Errorf("the holder ended %s after its lease stopped, before its TTL %s", took, ttl)
		}
		t.Logf("lease kept for %s: the holder held; lease stopped: it ended %s later (TTL %s)", 10*ttl, took.Round(time.Millisecond), ttl)
	case <-time.After(10 * ttl):
		t.Fatalf("the holder still held %s after its lease stopped (TTL %s)", 10*ttl, ttl)
	}

	start := time.Now()
	out, err := exec.Command(bin, "hold", "--max", "0", "--lease", filepath.Join(dir, "none"), "--lease-ttl", ttl.String()).CombinedOutput()
	if took := time.Since(start); err != nil || took < ttl || took > 10*ttl {
		t.Errorf("hold with a missing lease: %v after %s (TTL %s): %s", err, took, ttl, out)
	}
	if out, err := exec.Command(bin, "hold", "--max", "0").CombinedOutput(); err == nil {
		t.Errorf("hold --max 0 without a lease was accepted: %s", out)
	}
}

// wire is p as the harness hands it to the probe binary.
func wire(t *testing.T, p probes.Params) string {
	t.Helper()
	doc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
