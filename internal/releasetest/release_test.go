// Package releasetest proves `make release`: it makes a release of this
// checkout with a throwaway cosign key, then checks every artifact with the
// tool itself (the signed bundle over the folder, the image's signature and
// SBOM attestation in a loopback registry, each SBOM) and with the system's
// own tools (sha256sum -c, readelf), and that a changed artifact fails
// verification.
package releasetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const password = "release-test"

// releaseArches are the architectures the test releases for:
// $SANDCHECK_RELEASE_ARCHES (space-separated; amd64 must be one: the
// release's own CLI verifies it), else both that `make release` ships. `make
// test` releases amd64 only, from the build cache the other stages warmed;
// `make release-test` releases both, compiling the whole module again for
// arm64 (about six minutes of two cold cores).
func releaseArches(t *testing.T) []string {
	v := strings.Fields(os.Getenv("SANDCHECK_RELEASE_ARCHES"))
	if len(v) == 0 {
		return []string{"amd64", "arm64"}
	}
	for _, a := range v {
		if a != "amd64" && a != "arm64" {
			t.Fatalf("SANDCHECK_RELEASE_ARCHES=%q: %s is neither amd64 nor arm64", os.Getenv("SANDCHECK_RELEASE_ARCHES"), a)
		}
	}
	if !slices.Contains(v, "amd64") {
		t.Fatalf("SANDCHECK_RELEASE_ARCHES=%q: amd64 must be one (the release's amd64 CLI verifies the release)", os.Getenv("SANDCHECK_RELEASE_ARCHES"))
	}
	return v
}

func TestMakeReleaseVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds release binaries for two architectures and the tool image: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("builds the tool image with the Docker engine: needs root")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	arches := releaseArches(t)
	t.Logf("releasing for %s", strings.Join(arches, " "))
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// A CLI to make the key and serve the registry with: any build of this
	// checkout (the release's own binaries then verify the release).
	tool := filepath.Join(tmp, "sandcheck-dev")
	run(ctx, t, root, nil, "go", "build", "-o", tool, "./cmd/sandcheck")
	keys := filepath.Join(tmp, "keys")
	run(ctx, t, root, []string{"COSIGN_PASSWORD=" + password}, tool, "image", "keygen", "--dir", keys)

	reg, addr := serveRegistry(ctx, t, tool)
	defer func() { _ = reg.Process.Kill(); _ = reg.Wait() }()

	version := fmt.Sprintf("v0.0.0-releasetest.%d", time.Now().Unix())
	out := filepath.Join(tmp, "dist")
	repo := addr + "/sandcheck"
	t.Cleanup(func() {
		_ = exec.Command("docker", "image", "rm", "-f", "sandcheck:"+version).Run()
	})
	run(ctx, t, root, []string{
		"KEY=" + filepath.Join(keys, "cosign.key"), "COSIGN_PASSWORD=" + password,
		"VERSION=" + version, "PUSH=" + repo, "ARCHES=" + strings.Join(arches, " "),
	}, "make", "--no-print-directory", "release", "DIST="+out)

	pub := filepath.Join(keys, "cosign.pub")
	cli := filepath.Join(out, "sandcheck_"+version+"_linux_amd64")
	want := []string{"SHA256SUMS", "bundle.intoto.json"}
	for _, a := range []string{"sandcheck", "sandcheck-probe"} {
		for _, arch := range arches {
			want = append(want, a+"_"+version+"_linux_"+arch)
		}
	}
	want = append(want, "sandcheck-image_"+version+"_linux_amd64.tar")
	n := len(want)
	for _, f := range want[2:n] {
		want = append(want, f+".spdx.json")
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range ents {
		got[e.Name()] = true
	}
	for _, f := range want {
		if !got[f] {
			t.Errorf("the release lacks %s", f)
		}
		delete(got, f)
	}
	for f := range got {
		t.Errorf("the release holds %s, which no step should make", f)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The tool verifies its own release, and the system's tools agree.
	if o := run(ctx, t, out, nil, cli, "report", "verify", out, "--key", pub); !strings.Contains(o, fmt.Sprintf("verified %d files", len(want)-1)) {
		t.Errorf("report verify: %s", o)
	}
	run(ctx, t, out, nil, "sha256sum", "--strict", "-c", "SHA256SUMS")
	if o := run(ctx, t, out, nil, cli, "version"); !strings.HasPrefix(o, "sandcheck "+version+" ") {
		t.Errorf("the amd64 CLI reports %q, want version %s", firstLine(o), version)
	}
	for _, f := range want[2 : 2+2*len(arches)] {
		elf := run(ctx, t, out, nil, "readelf", "-hlW", f)
		if strings.Contains(elf, "Requesting program interpreter") {
			t.Errorf("%s is dynamically linked", f)
		}
		machine := "Advanced Micro Devices X86-64"
		if strings.HasSuffix(f, "_arm64") {
			machine = "AArch64"
		}
		if !strings.Contains(elf, machine) {
			t.Errorf("%s is not built for %s", f, machine)
		}
		if strings.Contains(run(ctx, t, out, nil, "readelf", "-SW", f), ".symtab") {
			t.Errorf("%s is not stripped (it has a .symtab)", f)
		}
	}
	// Each CLI's SBOM names the libraries it links (syft reads the Go
	// build information), the image's names the CLI inside it.
	sbomOf := []string{"sandcheck-image_" + version + "_linux_amd64.tar"}
	for _, arch := range arches {
		sbomOf = append(sbomOf, "sandcheck_"+version+"_linux_"+arch)
	}
	for _, f := range sbomOf {
		names := spdxPackages(t, filepath.Join(out, f+".spdx.json"))
		for _, m := range []string{"github.com/spf13/cobra", "github.com/open-policy-agent/opa"} {
			if !names[m] {
				t.Errorf("the SBOM of %s does not name %s (%d packages)", f, m, len(names))
			}
		}
	}

	// The image in the registry: signed with the key and its SBOM attested.
	ref := repo + ":" + version
	if o := run(ctx, t, out, nil, cli, "image", "verify", ref, "--key", pub, "--sbom", "-a", "org.opencontainers.image.version="+version); !strings.Contains(o, "verified ") {
		t.Errorf("image verify: %s", o)
	}

	// A changed artifact fails verification, with exit code 1: the CLI of
	// the last architecture (arm64 where it was built), not the one that
	// verifies.
	changed := "sandcheck_" + version + "_linux_" + arches[len(arches)-1]
	arm := filepath.Join(out, changed)
	b, err := os.ReadFile(arm)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(arm, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, cli, "report", "verify", out, "--key", pub)
	o, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 1 || !bytes.Contains(o, []byte(changed)) {
		t.Errorf("report verify of a changed %s: exit %d, want 1 naming the file:\n%s", changed, code, o)
	}
}

// serveRegistry starts `sandcheck registry serve` on a free loopback port
// and returns it with its address.
func serveRegistry(ctx context.Context, t *testing.T, tool string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, tool, "registry", "serve", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	re := regexp.MustCompile(`^registry serving on (127\.0\.0\.1:[0-9]+) `)
	select {
	case l := <-line:
		m := re.FindStringSubmatch(l)
		if m == nil {
			_ = cmd.Process.Kill()
			t.Fatalf("registry serve printed %q", l)
		}
		return cmd, m[1]
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("registry serve printed no address within 30 s")
	}
	return nil, ""
}

func spdxPackages(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name string `json:"name"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !strings.HasPrefix(doc.SPDXVersion, "SPDX-") {
		t.Fatalf("%s is not an SPDX JSON document (%q, %v)", path, doc.SPDXVersion, err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	return names
}

func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, buf.String())
	}
	return buf.String()
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
