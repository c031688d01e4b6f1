package targets

import (
	"errors"
	"strings"
	"testing"
)

const imageVerifyBase = `schema: sandcheck.dev/target/v1
name: x
runner: docker
image: 127.0.0.1:5000/sandcheck/runner@sha256:0000000000000000000000000000000000000000000000000000000000000000
profile: no-network-transform
docker:
  runtime: runc
  network: none
`

func TestImageVerify(t *testing.T) {
	tg, err := Parse("/etc/sandcheck/t.yaml", []byte(imageVerifyBase+"image_verify:\n  key: keys/cosign.pub\n  annotations: {team: platform}\n  require_sbom_attestation: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.KeyPath() != "/etc/sandcheck/keys/cosign.pub" || tg.ImageVerify.Annotations["team"] != "platform" || !tg.ImageVerify.RequireSBOMAttestation {
		t.Fatalf("got %+v, key %s", tg.ImageVerify, tg.KeyPath())
	}
	tg, err = Parse("t.yaml", []byte(imageVerifyBase+"image_verify:\n  key: /abs/cosign.pub\n"))
	if err != nil || tg.KeyPath() != "/abs/cosign.pub" {
		t.Fatalf("absolute key: %v, %s", err, tg.KeyPath())
	}
	if tg, err := Parse("t.yaml", []byte(imageVerifyBase)); err != nil || tg.ImageVerify != nil || tg.KeyPath() != "" {
		t.Fatalf("no image_verify: %v", err)
	}
	for _, c := range []struct{ src, want string }{
		{"image_verify:\n  annotations: {team: platform}\n", "$.image_verify: key is required"},
		{"image_verify:\n  key: k.pub\n  keys: x\n", "keys"},
	} {
		_, err := Parse("t.yaml", []byte(imageVerifyBase+c.src))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: want ErrInvalid naming %q, got %v", c.src, c.want, err)
		}
	}
}
