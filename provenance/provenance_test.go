package provenance

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
)

// fixture is a registry on loopback with one random image pushed, and two
// key pairs made for the test.
type fixture struct {
	reg              *Registry
	ref              name.Digest
	signer, other    *Signer
	verifier, otherV *Verifier
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg, err := ServeRegistry("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := ParseRef(reg.Addr + "/sandcheck/test:v1")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Push(context.Background(), img, tag)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{reg: reg, ref: ref}
	f.signer, f.verifier = keys(t, "pw1")
	f.other, f.otherV = keys(t, "")
	return f
}

func keys(t *testing.T, pw string) (*Signer, *Verifier) {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := GenerateKeys(dir, []byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(priv, []byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if s.Fingerprint != v.Fingerprint || !strings.HasPrefix(v.Fingerprint, "sha256:") {
		t.Fatalf("fingerprints differ: %s vs %s", s.Fingerprint, v.Fingerprint)
	}
	return s, v
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestSignVerify(t *testing.T) {
	f := newFixture(t)
	ann := map[string]string{"team": "platform"}
	if _, err := VerifyImage(ctx(t), f.ref, f.verifier, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("unsigned image: want ErrFailed, got %v", err)
	}
	if err := SignImage(ctx(t), f.ref, f.signer, ann); err != nil {
		t.Fatal(err)
	}
	res, err := VerifyImage(ctx(t), f.ref, f.verifier, ann)
	if err != nil {
		t.Fatalf("signed image: %v", err)
	}
	if res.Digest != f.ref.DigestStr() || !res.Pinned || res.Signatures != 1 || res.KeyFingerprint != f.verifier.Fingerprint || !strings.Contains(res.Tlog, "not required") {
		t.Fatalf("unexpected result %+v", res)
	}
	// The tag resolves to the same digest, but is not pinned.
	tag, _ := ParseRef(f.reg.Addr + "/sandcheck/test:v1")
	if res, err := VerifyImage(ctx(t), tag, f.verifier, nil); err != nil || res.Pinned {
		t.Fatalf("tag: %+v, %v", res, err)
	}
	if _, err := VerifyImage(ctx(t), f.ref, f.otherV, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("other key: want ErrFailed, got %v", err)
	}
	if _, err := VerifyImage(ctx(t), f.ref, f.verifier, map[string]string{"team": "other"}); !errors.Is(err, ErrFailed) {
		t.Fatalf("wrong annotation: want ErrFailed, got %v", err)
	}
}

func TestRetaggedImageFails(t *testing.T) {
	f := newFixture(t)
	if err := SignImage(ctx(t), f.ref, f.signer, nil); err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(512, 2)
	tag, _ := ParseRef(f.reg.Addr + "/sandcheck/test:v1")
	changed, err := Push(ctx(t), img, tag)
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyImage(ctx(t), tag, f.verifier, nil)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), changed.DigestStr()) {
		t.Fatalf("re-tagged image: want ErrFailed naming %s, got %v", changed.DigestStr(), err)
	}
}

func TestHarnessErrorsAreNotFailures(t *testing.T) {
	f := newFixture(t)
	// Malformed signature: not base64, payload not JSON.
	sig, err := static.NewSignature([]byte("not json"), "!!!")
	if err != nil {
		t.Fatal(err)
	}
	se, err := ociremote.SignedEntity(f.ref)
	if err != nil {
		t.Fatal(err)
	}
	if se, err = mutate.AttachSignatureToEntity(se, sig); err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteSignatures(f.ref.Repository, se); err != nil {
		t.Fatal(err)
	}
	_, err = VerifyImage(ctx(t), f.ref, f.verifier, nil)
	if err == nil || errors.Is(err, ErrFailed) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed signature: want ErrMalformed (not ErrFailed), got %v", err)
	}
	// Missing key.
	if _, err := LoadVerifier(filepath.Join(t.TempDir(), "nope.pub")); err == nil || errors.Is(err, ErrFailed) {
		t.Fatalf("missing key: want a harness error, got %v", err)
	}
	// Registry down.
	addr := f.reg.Addr
	f.reg.Close()
	ref, _ := ParseRef(addr + "/sandcheck/test@" + f.ref.DigestStr())
	_, err = VerifyImage(ctx(t), ref, f.verifier, nil)
	if err == nil || errors.Is(err, ErrFailed) {
		t.Fatalf("registry down: want a harness error, got %v", err)
	}
	// Only loopback registries.
	if _, err := ParseRef("192.0.2.1:5000/x:y"); err == nil {
		t.Fatal("a non-loopback registry was accepted")
	}
	if _, err := ServeRegistry("0.0.0.0:0", nil); err == nil {
		t.Fatal("a wildcard listen address was accepted")
	}
}

func TestSBOMAttestation(t *testing.T) {
	f := newFixture(t)
	sbom, err := GenerateSBOM(ctx(t), f.ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSBOM(sbom); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifySBOMAttestation(ctx(t), f.ref, f.verifier); !errors.Is(err, ErrFailed) {
		t.Fatalf("no attestation: want ErrFailed, got %v", err)
	}
	if err := AttestSBOM(ctx(t), f.ref, f.signer, []byte(`{"not":"spdx"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed SBOM: want ErrMalformed, got %v", err)
	}
	if err := AttestSBOM(ctx(t), f.ref, f.signer, sbom); err != nil {
		t.Fatal(err)
	}
	got, err := VerifySBOMAttestation(ctx(t), f.ref, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ParseSBOM(got)
	b, _ := ParseSBOM(sbom)
	if len(a) != len(b) {
		t.Fatalf("attested SBOM lists %d packages, generated %d", len(a), len(b))
	}
	if _, err := VerifySBOMAttestation(ctx(t), f.ref, f.otherV); !errors.Is(err, ErrFailed) {
		t.Fatalf("other key: want ErrFailed, got %v", err)
	}
}

func TestParseSBOM(t *testing.T) {
	doc := `{"spdxVersion":"SPDX-2.3","packages":[
		{"SPDXID":"SPDXRef-DocumentRoot-Image-x","name":"x","primaryPackagePurpose":"CONTAINER"},
		{"SPDXID":"SPDXRef-Package-1","name":"busybox","versionInfo":"1.35.0","licenseDeclared":"GPL-2.0-only","licenseConcluded":"NOASSERTION"}]}`
	pk, err := ParseSBOM([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(pk) != 1 || pk[0].String() != "busybox@1.35.0" || len(pk[0].Licenses) != 1 || pk[0].Licenses[0] != "GPL-2.0-only" {
		t.Fatalf("got %+v", pk)
	}
	for _, bad := range []string{``, `[]`, `{"spdxVersion":"SPDX-2.3"}`, `{"bomFormat":"CycloneDX","packages":[]}`, `{"spdxVersion":"SPDX-2.3","packages":[{"SPDXID":"a"}]}`} {
		if _, err := ParseSBOM([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: want ErrMalformed, got %v", bad, err)
		}
	}
}

func TestBundle(t *testing.T) {
	s, v := keys(t, "pw")
	_, other := keys(t, "")
	dir := t.TempDir()
	files := map[string]string{
		"run.json":        `{"run_id":"r1","verdict":{"pass":true}}`,
		"evidence.jsonl":  "{}\n{}\n",
		"sbom.spdx.json":  `{"spdxVersion":"SPDX-2.3","packages":[]}`,
		"summary.md":      "# ok\n",
		"outputs/a/b.txt": "x",
	}
	for n, c := range files {
		p := filepath.Join(dir, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := SignBundle(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != len(files) || res.RunID != "r1" {
		t.Fatalf("signed %+v", res)
	}
	if _, err := VerifyBundle(dir, v); err != nil {
		t.Fatalf("untouched bundle: %v", err)
	}
	if _, err := VerifyBundle(dir, other); !errors.Is(err, ErrFailed) {
		t.Fatalf("other key: want ErrFailed, got %v", err)
	}
	// Changing any byte of any file fails; restoring it verifies again.
	for n, c := range files {
		for i := range len(c) {
			b := []byte(c)
			b[i] ^= 0x01
			p := filepath.Join(dir, n)
			os.WriteFile(p, b, 0o644)
			if _, err := VerifyBundle(dir, v); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), n) {
				t.Fatalf("%s byte %d changed: want ErrFailed naming the file, got %v", n, i, err)
			}
			os.WriteFile(p, []byte(c), 0o644)
		}
	}
	if _, err := VerifyBundle(dir, v); err != nil {
		t.Fatalf("restored bundle: %v", err)
	}
	// An added file and a removed file fail.
	os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644)
	if _, err := VerifyBundle(dir, v); !errors.Is(err, ErrFailed) {
		t.Fatalf("added file: want ErrFailed, got %v", err)
	}
	os.Remove(filepath.Join(dir, "extra"))
	os.Remove(filepath.Join(dir, "summary.md"))
	if _, err := VerifyBundle(dir, v); !errors.Is(err, ErrFailed) {
		t.Fatalf("removed file: want ErrFailed, got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "summary.md"), []byte(files["summary.md"]), 0o644)
	// A changed byte in the envelope itself: the signature or the envelope fails.
	env, _ := os.ReadFile(res.Path)
	for _, i := range []int{len(env) / 2, len(env) - 5} {
		b := append([]byte(nil), env...)
		b[i] ^= 0x01
		os.WriteFile(res.Path, b, 0o644)
		if _, err := VerifyBundle(dir, v); err == nil {
			t.Fatalf("envelope byte %d changed: verified", i)
		}
	}
	// A malformed or missing bundle is a harness error, not a failure.
	os.WriteFile(res.Path, []byte("garbage"), 0o644)
	if _, err := VerifyBundle(dir, v); !errors.Is(err, ErrMalformed) || errors.Is(err, ErrFailed) {
		t.Fatalf("garbage bundle: want ErrMalformed, got %v", err)
	}
	os.Remove(res.Path)
	if _, err := VerifyBundle(dir, v); err == nil || errors.Is(err, ErrFailed) {
		t.Fatalf("missing bundle: want a harness error, got %v", err)
	}
}

// A signed file replaced by a symlink (to a copy with the right content,
// or to a host file) or by a fifo is a verification failure naming the
// file; the link is not followed and the fifo does not block verify.
func TestBundleReplacedBySpecialFile(t *testing.T) {
	s, v := keys(t, "pw")
	dir := t.TempDir()
	content := `{"run_id":"r1"}`
	for n, c := range map[string]string{"run.json": content, "summary.md": "# ok\n"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := SignBundle(dir, s); err != nil {
		t.Fatal(err)
	}
	// Same bytes elsewhere: following the link would verify.
	copyDir := t.TempDir()
	same := filepath.Join(copyDir, "summary.md")
	if err := os.WriteFile(same, []byte("# ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "summary.md")
	replace := func(t *testing.T, make func() error) {
		t.Helper()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := make(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(p)
			os.WriteFile(p, []byte("# ok\n"), 0o644)
		})
	}
	for _, c := range []struct {
		name, want string
		make       func() error
	}{
		{"symlink to the same bytes", "summary.md: a symbolic link", func() error { return os.Symlink(same, p) }},
		{"symlink to a host file", "summary.md: a symbolic link", func() error { return os.Symlink("/etc/hostname", p) }},
		{"fifo", "summary.md: a fifo", func() error { return syscall.Mkfifo(p, 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			replace(t, c.make)
			done := make(chan error, 1)
			go func() { _, err := VerifyBundle(dir, v); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "summary.md: missing") {
					t.Fatalf("want ErrFailed naming %q (once), got %v", c.want, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("verify blocked on the replaced file")
			}
		})
	}
	if _, err := VerifyBundle(dir, v); err != nil {
		t.Fatalf("restored bundle: %v", err)
	}
	// A fifo as the bundle itself: a harness error (the check could not be
	// made), returned without blocking.
	bp := filepath.Join(dir, BundleFile)
	os.Rename(bp, bp+".keep")
	if err := syscall.Mkfifo(bp, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := VerifyBundle(dir, v); done <- err }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, ErrFailed) {
			t.Fatalf("fifo bundle: want a harness error, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("verify blocked on a fifo bundle")
	}
	// Signing a folder holding a link is refused.
	os.Remove(bp)
	os.Rename(bp+".keep", bp)
	if err := os.Symlink(same, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := SignBundle(dir, s); err == nil || !strings.Contains(err.Error(), "link: a symbolic link") {
		t.Fatalf("signing a folder with a link: %v", err)
	}
}

// A signature copied with its image into another repository (same digest,
// same key) does not verify there: the payload's docker-reference names
// the repository it was signed for. A claim naming the repository by tag
// or digest verifies, one naming another repository does not.
func TestSignatureCopiedToAnotherRepository(t *testing.T) {
	f := newFixture(t)
	if err := SignImage(ctx(t), f.ref, f.signer, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyImage(ctx(t), f.ref, f.verifier, nil); err != nil {
		t.Fatalf("signed image in its own repository: %v", err)
	}
	// Copy the image and its signature manifest, as `crane copy` or
	// `cosign copy` would, into another repository of the same registry.
	img, err := remote.Image(f.ref)
	if err != nil {
		t.Fatal(err)
	}
	dstTag, _ := ParseRef(f.reg.Addr + "/attacker/copy:v1")
	copied, err := Push(ctx(t), img, dstTag)
	if err != nil {
		t.Fatal(err)
	}
	if copied.DigestStr() != f.ref.DigestStr() {
		t.Fatalf("copy changed the digest: %s vs %s", copied.DigestStr(), f.ref.DigestStr())
	}
	se, err := ociremote.SignedEntity(f.ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteSignatures(copied.Repository, se); err != nil {
		t.Fatal(err)
	}
	// The copy really carries the signature (else the test proves nothing).
	st, _ := ociremote.SignatureTag(copied)
	sigs, err := ociremote.Signatures(st)
	if err != nil {
		t.Fatal(err)
	}
	if sl, err := sigs.Get(); err != nil || len(sl) != 1 {
		t.Fatalf("copied signatures: %d, %v", len(sl), err)
	}
	_, err = VerifyImage(ctx(t), copied, f.verifier, nil)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), f.ref.Repository.Name()) || !strings.Contains(err.Error(), copied.Repository.Name()) {
		t.Fatalf("copied signature: want ErrFailed naming both repositories, got %v", err)
	}

	// Signatures whose claim is written by hand, in the source repository.
	for _, c := range []struct {
		name  string
		claim func(g *fixture) string
		ok    bool
	}{
		{"by tag", func(g *fixture) string { return g.ref.Repository.Name() + ":v1" }, true},
		{"by digest", func(g *fixture) string { return g.ref.String() }, true},
		{"another repository", func(g *fixture) string { return g.reg.Addr + "/sandcheck/other" }, false},
		{"not a reference", func(*fixture) string { return "not a reference!" }, false},
	} {
		g := newFixture(t)
		signClaim(t, g, c.claim(g))
		_, err := VerifyImage(ctx(t), g.ref, g.verifier, nil)
		if c.ok && err != nil {
			t.Errorf("claim %s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrFailed) {
			t.Errorf("claim %s: want ErrFailed, got %v", c.name, err)
		}
	}
}

// signClaim signs f.ref with a payload whose docker-reference is claim.
func signClaim(t *testing.T, f *fixture, claim string) {
	t.Helper()
	pl := fmt.Sprintf(`{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`,
		claim, f.ref.DigestStr())
	raw, err := f.signer.SignMessage(strings.NewReader(pl))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := static.NewSignature([]byte(pl), base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	se, err := ociremote.SignedEntity(f.ref)
	if err != nil {
		t.Fatal(err)
	}
	if se, err = mutate.AttachSignatureToEntity(se, sig); err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteSignatures(f.ref.Repository, se); err != nil {
		t.Fatal(err)
	}
}
