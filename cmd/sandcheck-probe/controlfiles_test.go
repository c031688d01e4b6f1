package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/probes/impl"
)

// hostControlFiles are the host's kernel control files a probe opens for
// writing (never writes: opening is the proof): written, each crashes the
// host or runs a program of the writer's choosing as host root. The
// cgroup v1 release_agents are added as the host mounts them.
var hostControlFiles = []string{
	"/proc/sysrq-trigger",
	"/proc/sys/kernel/core_pattern",
	"/sys/kernel/uevent_helper",
	"/proc/sys/kernel/modprobe",
}

// TestNoProbeWritesAHostControlFile (issue 41 item 6): every probe that is
// safe on the host (as in TestBinary) runs as root on the host, in a mount
// namespace of its own (and a network namespace with no link up) where a
// canary file is bound over each host control
// file, so that root's write opens succeed (host.core-pattern and
// host.sysrq-trigger escape) and reach the canaries. No canary may change:
// not its content, size or modification time. The control: a shell that
// writes one byte to each path in the same set-up changes every canary,
// so the set-up sees a write (and the shell writes only once it has read
// each canary's own content back through the path it will write). The
// host's own release_agents (host.release-agent mounts a hierarchy of its
// own, where no canary can be bound in advance) must read as before.
func TestNoProbeWritesAHostControlFile(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI runs as root)")
		}
		t.Skip("needs root: a mount namespace and root's write opens")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("no unshare (util-linux): %v", err)
	}
	bin := buildProbe(t)
	files := slices.Clone(hostControlFiles)
	agents, _ := filepath.Glob("/sys/fs/cgroup/*/release_agent")
	for _, a := range agents {
		if fi, err := os.Lstat(filepath.Dir(a)); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			files = append(files, a)
		}
	}
	var present []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			present = append(present, f)
		}
	}
	if !slices.Contains(present, "/proc/sys/kernel/core_pattern") {
		t.Fatalf("control files on this host: %v; want core_pattern at least", present)
	}
	// host.sysrq-trigger opens sysrq-trigger and uevent_helper: it can
	// escape only where the kernel offers one of them.
	wantOpen := []string{"host.core-pattern"}
	if slices.Contains(present, "/proc/sysrq-trigger") || slices.Contains(present, "/sys/kernel/uevent_helper") {
		wantOpen = append(wantOpen, "host.sysrq-trigger")
	}
	t.Logf("canaries over %d control files: %v", len(present), present)
	agentsBefore := readAll(t, agents)

	// canaries makes one canary file per control file, and the script
	// that binds them and checks each bind before it runs argv.
	canaries := func(t *testing.T) (map[string]string, string) {
		dir := t.TempDir()
		m := map[string]string{}
		var script strings.Builder
		script.WriteString("set -eu\n")
		for i, f := range present {
			c := filepath.Join(dir, fmt.Sprintf("canary-%d", i))
			body := fmt.Sprintf("sandcheck-canary-%d\n", i)
			if err := os.WriteFile(c, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(c, old, old); err != nil {
				t.Fatal(err)
			}
			m[f] = c
			fmt.Fprintf(&script, "mount --bind %s %s\n", c, f)
			fmt.Fprintf(&script, "[ \"$(cat %s)\" = %q ] || { echo 'bind of %s not in place' >&2; exit 97; }\n", f, strings.TrimSuffix(body, "\n"), f)
		}
		script.WriteString("exec \"$@\"\n")
		return m, script.String()
	}
	type state struct {
		body  string
		size  int64
		mtime time.Time
	}
	look := func(t *testing.T, m map[string]string) map[string]state {
		out := map[string]state{}
		for f, c := range m {
			fi, err := os.Stat(c)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(c)
			out[f] = state{string(b), fi.Size(), fi.ModTime()}
		}
		return out
	}
	inNamespace := func(t *testing.T, script string, argv ...string) (string, string, error) {
		// A network namespace of its own too: its loopback is down and it
		// has no other link, so the metadata probes' default address
		// (none is handed here) is reached by nothing.
		cmd := exec.Command(unshare, append([]string{"--mount", "--net", "--propagation", "private", "sh", "-c", script, "sh"}, argv...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	t.Run("control: a write is seen", func(t *testing.T) {
		m, script := canaries(t)
		before := look(t, m)
		var w strings.Builder
		for _, f := range present {
			fmt.Fprintf(&w, "printf x >> %s\n", f)
		}
		if _, stderr, err := inNamespace(t, script, "sh", "-c", w.String()); err != nil {
			t.Fatalf("the writing shell: %v\n%s", err, stderr)
		}
		after := look(t, m)
		for _, f := range present {
			if after[f] == before[f] {
				t.Errorf("%s: a byte written through it left its canary as it was: the set-up cannot see a write", f)
			}
		}
	})

	t.Run("the probes", func(t *testing.T) {
		m, script := canaries(t)
		before := look(t, m)
		var ids []string
		for _, id := range impl.IDs() {
			if !slices.Contains(unsafeOnHost, id) && !strings.HasPrefix(id, "teardown.") {
				ids = append(ids, id)
			}
		}
		doc := wire(t, probes.Params{Token: "t-control", Marker: "m-control", Phase: "check", ProbeDir: filepath.Dir(bin), Probes: ids})
		out, stderr, err := inNamespace(t, script, bin, "run", "--token", "t-control", "--params", doc)
		if err != nil {
			t.Fatalf("probe run: %v\n%s", err, stderr)
		}
		res, err := probes.ParseResults(strings.NewReader(out))
		if err != nil || len(res) != len(ids) {
			t.Fatalf("%d results for %d probes (%v)", len(res), len(ids), err)
		}
		for _, r := range res {
			if slices.Contains(wantOpen, r.Probe) && r.Outcome != probes.Escaped {
				t.Errorf("%s: %s (%s), want escaped: it did not open a canary for writing, so the test proves nothing of it", r.Probe, r.Outcome, r.Detail)
			}
		}
		after := look(t, m)
		for _, f := range present {
			if after[f] != before[f] {
				t.Errorf("%s: a probe changed it: %+v, was %+v", f, after[f], before[f])
			}
		}
		if now := readAll(t, agents); !slices.Equal(now, agentsBefore) {
			t.Errorf("the host's release_agents changed: %q, were %q", now, agentsBefore)
		}
	})
}

func readAll(t *testing.T, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		out = append(out, p+"="+string(b))
	}
	return out
}
