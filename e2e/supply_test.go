package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
)

// supply is a loopback registry served by `sandcheck registry serve`, and a
// cosign key pair (plus a second, unrelated one) made by `sandcheck image
// keygen`.
type supply struct {
	reg           string
	key, pub      string
	otherPub      string
	stopRegistry  func()
	registryStops chan struct{}
}

const keyPassword = "e2e-password"

func newSupply(t *testing.T) *supply {
	t.Helper()
	bin := binDir(t)
	t.Setenv("COSIGN_PASSWORD", keyPassword)
	cmd := exec.Command(filepath.Join(bin, "sandcheck"), "registry", "serve", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &supply{registryStops: make(chan struct{})}
	go func() { cmd.Wait(); close(s.registryStops) }()
	s.stopRegistry = func() {
		if cmd.Process != nil {
			cmd.Process.Signal(os.Interrupt)
		}
		select {
		case <-s.registryStops:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-s.registryStops
		}
	}
	t.Cleanup(s.stopRegistry)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("registry serve printed no address: %v\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`serving on (127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("registry serve printed %q", line)
	}
	s.reg = m[1]
	dir := t.TempDir()
	if r := sandcheck(t, "image", "keygen", "--dir", dir); r.code != 0 {
		t.Fatalf("keygen: exit %d\n%s", r.code, r.stderr)
	}
	s.key, s.pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	other := t.TempDir()
	if r := sandcheck(t, "image", "keygen", "--dir", other); r.code != 0 {
		t.Fatalf("keygen: exit %d\n%s", r.code, r.stderr)
	}
	s.otherPub = filepath.Join(other, "cosign.pub")
	return s
}

// push copies a local image to the registry (and back into the engine by
// digest) and returns the digest reference.
func (s *supply) push(t *testing.T, local, dst string) string {
	t.Helper()
	r := sandcheck(t, "image", "push", "--pull", local, s.reg+"/"+dst)
	if r.code != 0 {
		t.Fatalf("image push %s: exit %d\n%s", local, r.code, r.stderr)
	}
	ref := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^127\.0\.0\.1:\d+/.+@sha256:[0-9a-f]{64}$`).MatchString(ref) {
		t.Fatalf("image push printed %q, want a digest reference", ref)
	}
	// The engine's reference to the pulled image goes with the registry
	// (the image itself stays while sandcheck/runner:dev names it).
	t.Cleanup(func() { exec.Command("docker", "image", "rm", ref).Run() })
	return ref
}

// derive builds a local image from the runner with extra files and returns
// its tag; it is removed when the test ends.
func derive(t *testing.T, tag string, files map[string]string) string {
	t.Helper()
	ctx := t.TempDir()
	df := "FROM sandcheck/runner:dev\n"
	for p, c := range files {
		name := strings.ReplaceAll(strings.Trim(p, "/"), "/", "_")
		if err := os.WriteFile(filepath.Join(ctx, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		df += "COPY " + name + " " + p + "\n"
	}
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "build", "-q", "-t", tag, ctx).CombinedOutput()
	if err != nil {
		t.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", tag).Run() })
	return tag
}

// target writes the hardened reference with image and image_verify
// replaced, the seccomp profile by absolute path.
func (s *supply) target(t *testing.T, image, profile, extra string) string {
	t.Helper()
	dir, _ := filepath.Abs("../fixtures/targets")
	b, err := os.ReadFile(filepath.Join(dir, "hardened.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), "image: sandcheck/runner:dev", "image: "+image, 1)
	src = strings.Replace(src, "profile: no-network-transform", "profile: "+profile, 1)
	src = strings.Replace(src, "seccomp: seccomp-default.json", "seccomp: "+filepath.Join(dir, "seccomp-default.json"), 1)
	src += "image_verify:\n  key: " + s.pub + "\n  annotations: {team: platform}\n" + extra
	p := filepath.Join(t.TempDir(), "supply.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func criterion(rec *evidence.Record, id string) evidence.Criterion {
	if rec == nil || rec.Verdict == nil {
		return evidence.Criterion{}
	}
	for _, c := range rec.Verdict.Criteria {
		if c.ID == id {
			return c
		}
	}
	return evidence.Criterion{}
}

// refused checks a run the image gate stopped: exit 1, no sandbox started,
// and "immutable approved base" failing with a reason containing want.
func refused(t *testing.T, r run, want string) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "no sandbox started") {
		t.Errorf("stdout does not say no sandbox started:\n%s", r.stdout)
	}
	rec := r.mustRecord(t)
	if len(rec.Sandboxes) != 0 || len(rec.Results) != 0 {
		t.Errorf("a refused image started %d sandboxes, %d results", len(rec.Sandboxes), len(rec.Results))
	}
	c := criterion(rec, "immutable-approved-base")
	if c.Status != evidence.StatusFail || !strings.Contains(strings.Join(c.Reasons, "\n"), want) {
		t.Errorf("immutable-approved-base %s, reasons %q; want fail naming %q", c.Status, c.Reasons, want)
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=sandcheck.run="+rec.RunID).Output()
	if len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("containers of a refused run exist: %s", out)
	}
}

// TestSupplyChain runs issue 14's checks end to end: a signed image verifies
// and runs; the same image re-tagged after one layer changed fails and no
// sandbox starts; an unsigned image fails; a forbidden package is caught;
// the runner's SBOM lists busybox; a tampered bundle fails verification;
// harness faults exit 2, failed verifications exit 1.
func TestSupplyChain(t *testing.T) {
	s := newSupply(t)
	signed := s.push(t, "sandcheck/runner:dev", "sandcheck/runner:signed")
	if r := sandcheck(t, "image", "sign", signed, "--key", s.key, "-a", "team=platform", "--attest-sbom"); r.code != 0 {
		t.Fatalf("image sign: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("verify", func(t *testing.T) {
		r := sandcheck(t, "image", "verify", signed, "--key", s.pub, "-a", "team=platform", "--sbom")
		if r.code != 0 || !strings.Contains(r.stdout, "transparency log not required") || !strings.Contains(r.stdout, "verified SBOM attestation") {
			t.Errorf("verify signed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := sandcheck(t, "image", "verify", signed, "--key", s.otherPub); r.code != 1 {
			t.Errorf("verify with another key: exit %d, want 1\n%s", r.code, r.stderr)
		}
		if r := sandcheck(t, "image", "verify", signed, "--key", s.pub, "-a", "team=other"); r.code != 1 {
			t.Errorf("verify with a wrong annotation: exit %d, want 1\n%s", r.code, r.stderr)
		}
		if r := sandcheck(t, "image", "verify", signed, "--key", filepath.Join(t.TempDir(), "missing.pub")); r.code != 2 || !strings.Contains(r.stderr, "missing.pub") {
			t.Errorf("verify with a missing key: exit %d, want 2 naming it\n%s", r.code, r.stderr)
		}
	})

	t.Run("runner SBOM lists busybox", func(t *testing.T) {
		start := time.Now()
		r := sandcheck(t, "image", "sbom", signed, "--list")
		if r.code != 0 || !regexp.MustCompile(`(?m)^busybox@\d+\.\d+`).MatchString(r.stdout) {
			t.Errorf("image sbom: exit %d, want busybox@VERSION listed\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("SBOM of the runner image in %s", time.Since(start).Round(time.Millisecond))
	})

	// The signed run's folder outlives its subtest: the bundle and runs
	// find subtests read it.
	passed := sandcheck(t, "run", "--target", s.target(t, signed, "no-network-transform", "  require_sbom_attestation: true\n"), "--probes", "privilege.root-uid")
	t.Run("signed image verifies and runs", func(t *testing.T) {
		rec := passed.mustRecord(t)
		if len(rec.Sandboxes) == 0 || len(rec.Results) != 1 {
			t.Fatalf("no sandbox ran: %d sandboxes, %d results\n%s%s", len(rec.Sandboxes), len(rec.Results), passed.stdout, passed.stderr)
		}
		p := rec.Provenance
		if p == nil || !p.Signature.Verified || !p.Pinned || p.Signature.TlogRequired || p.SBOM == nil || !p.SBOM.Attested {
			t.Fatalf("provenance %+v", p)
		}
		if p.ImageID != rec.Image.Digest {
			t.Errorf("verified image ID %s, the run's image %s", p.ImageID, rec.Image.Digest)
		}
		b, err := os.ReadFile(filepath.Join(passed.out, p.SBOM.Path))
		if err != nil || !strings.Contains(string(b), `"busybox"`) {
			t.Errorf("stored SBOM %s: %v", p.SBOM.Path, err)
		}
		c := criterion(rec, "immutable-approved-base")
		if c.Status != evidence.StatusPass || !strings.Contains(strings.Join(c.Reasons, "\n"), "transparency log not required") {
			t.Errorf("immutable-approved-base %s: %q", c.Status, c.Reasons)
		}
		for _, f := range []string{"summary.md", "report.html"} {
			if b, err := os.ReadFile(filepath.Join(passed.out, f)); err != nil || !strings.Contains(string(b), "transparency log not required") {
				t.Errorf("%s does not say the transparency log was not required (%v)", f, err)
			}
		}
		if passed.code != 0 {
			t.Errorf("exit %d\n%s", passed.code, passed.stdout)
		}
		// The stored record, provenance and all, re-grades the same way.
		if r := sandcheck(t, "policy", "eval", "--input", filepath.Join(passed.out, "run.json")); r.code != 0 || !strings.Contains(r.stdout, "immutable-approved-base") {
			t.Errorf("policy eval of the stored record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("re-tagged after one layer changed", func(t *testing.T) {
		local := derive(t, "sandcheck/runner:e2e-changed", map[string]string{"/etc/motd": "changed\n"})
		changed := s.push(t, local, "sandcheck/runner:signed") // the signed tag now names other content
		refused(t, sandcheck(t, "run", "--target", s.target(t, changed, "no-network-transform", "")), "carries no valid signature")
		tagged := s.reg + "/sandcheck/runner:signed"
		r := sandcheck(t, "run", "--target", s.target(t, tagged, "no-network-transform", ""))
		refused(t, r, "is a tag without a digest")
		refused(t, r, "carries no valid signature")
		if r := sandcheck(t, "image", "verify", tagged, "--key", s.pub); r.code != 1 {
			t.Errorf("verify of the re-tagged image: exit %d, want 1\n%s", r.code, r.stderr)
		}
	})

	t.Run("unsigned image", func(t *testing.T) {
		unsigned := s.push(t, "sandcheck/runner:dev", "sandcheck/unsigned:v1")
		refused(t, sandcheck(t, "run", "--target", s.target(t, unsigned, "no-network-transform", "")), "is not signed")
	})

	t.Run("forbidden package", func(t *testing.T) {
		status := "Package: gcc-12\nStatus: install ok installed\nPriority: optional\nSection: devel\nInstalled-Size: 1\nMaintainer: x <x@example.org>\nArchitecture: amd64\nVersion: 12.2.0-14\nDescription: GNU C compiler\n\n" +
			"Package: curl\nStatus: install ok installed\nPriority: optional\nSection: web\nInstalled-Size: 1\nMaintainer: x <x@example.org>\nArchitecture: amd64\nVersion: 7.88.1-10\nDescription: command line tool for transferring data with URL syntax\n"
		local := derive(t, "sandcheck/runner:e2e-gcc", map[string]string{
			"/var/lib/dpkg/status": status,
			"/etc/os-release":      "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12\"\n",
		})
		ref := s.push(t, local, "sandcheck/gcc:v1")
		if r := sandcheck(t, "image", "sign", ref, "--key", s.key, "-a", "team=platform"); r.code != 0 {
			t.Fatalf("sign: exit %d\n%s", r.code, r.stderr)
		}
		r := sandcheck(t, "run", "--target", s.target(t, ref, "no-network-transform", ""))
		refused(t, r, "contains gcc-12 12.2.0-14, which profile no-network-transform forbids")
		refused(t, r, "contains curl")
	})

	t.Run("bundle", func(t *testing.T) {
		if passed.rec == nil {
			t.Skip("the signed run did not complete")
		}
		dir := passed.out
		if r := sandcheck(t, "report", "sign", dir, "--key", s.key); r.code != 0 {
			t.Fatalf("report sign: exit %d\n%s", r.code, r.stderr)
		}
		if r := sandcheck(t, "report", "verify", dir, "--key", s.pub); r.code != 0 || !strings.Contains(r.stdout, "transparency log not required") {
			t.Fatalf("report verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := sandcheck(t, "report", "verify", dir, "--key", s.otherPub); r.code != 1 {
			t.Errorf("report verify with another key: exit %d, want 1", r.code)
		}
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, e := range entries {
			if e.IsDir() || e.Name() == "bundle.intoto.json" {
				continue
			}
			p := filepath.Join(dir, e.Name())
			orig, err := os.ReadFile(p)
			if err != nil || len(orig) == 0 {
				continue
			}
			b := append([]byte(nil), orig...)
			b[len(b)/2] ^= 0x20
			os.WriteFile(p, b, 0o644)
			r := sandcheck(t, "report", "verify", dir, "--key", s.pub)
			os.WriteFile(p, orig, 0o644)
			if r.code != 1 || !strings.Contains(r.stderr, e.Name()) {
				t.Errorf("%s changed: exit %d, want 1 naming it\n%s", e.Name(), r.code, r.stderr)
			}
			n++
		}
		if n < 4 {
			t.Errorf("only %d files tampered with; the bundle should hold the record, SBOM and reports", n)
		}
		if r := sandcheck(t, "report", "verify", dir, "--key", s.pub); r.code != 0 {
			t.Errorf("restored: exit %d\n%s", r.code, r.stderr)
		}
		os.WriteFile(filepath.Join(dir, "bundle.intoto.json"), []byte("{"), 0o644)
		if r := sandcheck(t, "report", "verify", dir, "--key", s.pub); r.code != 2 {
			t.Errorf("malformed bundle: exit %d, want 2\n%s", r.code, r.stderr)
		}
	})

	t.Run("runs find", func(t *testing.T) {
		if passed.rec == nil {
			t.Skip("the signed run did not complete")
		}
		root := filepath.Dir(passed.out)
		r := sandcheck(t, "runs", "find", "--package", "busybox", root)
		if r.code != 0 || !strings.Contains(r.stdout, passed.rec.RunID) {
			t.Errorf("find busybox: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := sandcheck(t, "runs", "find", "--package", "busybox@0.0.0-none", root); r.code != 1 {
			t.Errorf("find a version no run has: exit %d, want 1", r.code)
		}
		if r := sandcheck(t, "runs", "find", "--package", "gcc-12", root); r.code != 1 {
			t.Errorf("find gcc-12: exit %d, want 1\n%s", r.code, r.stdout)
		}
	})

	t.Run("registry down exits 2", func(t *testing.T) {
		s.stopRegistry()
		r := sandcheck(t, "image", "verify", signed, "--key", s.pub)
		if r.code != 2 || !strings.Contains(r.stderr, s.reg) {
			t.Errorf("registry down: exit %d, want 2 naming %s\n%s", r.code, s.reg, r.stderr)
		}
		r = sandcheck(t, "run", "--target", s.target(t, signed, "no-network-transform", ""))
		if r.code != 2 {
			t.Errorf("run with the registry down: exit %d, want 2\n%s", r.code, r.stderr)
		}
	})
}
