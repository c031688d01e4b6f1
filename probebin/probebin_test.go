package probebin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEmbeddedProbeIsCurrent rebuilds the probe for each architecture the
// CLI embeds one for, from the sources of this checkout exactly as `make
// probe-embed` does, and requires each embedded copy to be that binary: a
// change to the probe's code without `make probe-embed` would otherwise
// ship a CLI whose probe is not the code under review. The running
// architecture's copy must also be what Binary returns.
func TestEmbeddedProbeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the probe: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the embedded probes are for linux; this is %s", runtime.GOOS)
	}
	for _, arch := range embedArches(t) {
		t.Run(arch, func(t *testing.T) {
			file := "sandcheck-probe.linux-" + arch + ".gz"
			got := gunzipFile(t, file)
			out := filepath.Join(t.TempDir(), "sandcheck-probe")
			cmd := exec.Command("bash", "../scripts/build-probe.sh", out, arch)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("building the probe: %v\n%s", err, b)
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				gs, ws := sha256.Sum256(got), sha256.Sum256(want)
				t.Fatalf("the embedded probe (sha256 %s, %d bytes) is not what the probe's sources build (sha256 %s, %d bytes): run `make probe-embed` and commit probebin/%s",
					hex.EncodeToString(gs[:]), len(got), hex.EncodeToString(ws[:]), len(want), file)
			}
			if arch != runtime.GOARCH {
				return
			}
			emb, _, err := Binary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(emb, want) {
				t.Fatalf("Binary() is not probebin/%s", file)
			}
		})
	}
}

// embedArches are the architectures whose embedded probe is rebuilt and
// compared: $SANDCHECK_RELEASE_ARCHES (space-separated), both when it is
// unset. `make test` sets amd64 alone (arm64 is a whole cross-compile of the
// probe); `make release-test` checks both, as the release builds both.
func embedArches(t *testing.T) []string {
	t.Helper()
	v := strings.Fields(os.Getenv("SANDCHECK_RELEASE_ARCHES"))
	if len(v) == 0 {
		return []string{"amd64", "arm64"}
	}
	for _, a := range v {
		if a != "amd64" && a != "arm64" {
			t.Fatalf("SANDCHECK_RELEASE_ARCHES=%q: %s is neither amd64 nor arm64", os.Getenv("SANDCHECK_RELEASE_ARCHES"), a)
		}
	}
	return v
}

func gunzipFile(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxProbe+1))
	if err != nil || len(b) > maxProbe {
		t.Fatalf("%s: %d bytes, %v", name, len(b), err)
	}
	return b
}

// TestPathWritesAndRepairs extracts the probe into an empty cache, then
// replaces the extracted file by a tampered copy and by a symbolic link to
// another file: each time Path must put the embedded bytes back and never
// write through the link.
func TestPathWritesAndRepairs(t *testing.T) {
	if len(probeGz) == 0 {
		t.Skip("no probe embedded for this platform")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	want, digest, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	check := func(stage string) string {
		t.Helper()
		p, err := Path()
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %s is %v (%v), want a regular file with mode 0755", stage, p, fi, err)
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s: %s does not hold the embedded probe (%v)", stage, p, err)
		}
		return p
	}
	p := check("empty cache")
	if filepath.Base(filepath.Dir(p)) != digest[:16] {
		t.Errorf("extracted to %s, want a folder named by the digest %s", p, digest[:16])
	}

	if err := os.WriteFile(p, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("tampered copy")

	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	check("symbolic link")
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Errorf("the link's target was written: %q", b)
	}
}
