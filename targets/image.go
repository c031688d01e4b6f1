package targets

import (
	"path/filepath"
	"strings"
)

// ImageVerify is how the harness verifies the target's image before any
// sandbox starts (the target file's image_verify section; image itself is
// the reference). The image must sit in a loopback registry, pinned by
// digest, signed with the key's private half; verification is key-based and
// offline (no transparency log, no certificate authority).
type ImageVerify struct {
	// Key is the cosign public key file (PEM); a relative path is relative
	// to the target file.
	Key string `yaml:"key"`
	// Annotations must each appear, with the same value, in the signature.
	Annotations map[string]string `yaml:"annotations,omitempty"`
	// RequireSBOMAttestation requires an SBOM attestation signed with the
	// same key; without it the harness catalogs the verified image itself.
	RequireSBOMAttestation bool `yaml:"require_sbom_attestation,omitempty"`
}

// KeyPath is the key file, resolved against the target file's folder.
func (t *Target) KeyPath() string {
	if t.ImageVerify == nil || t.ImageVerify.Key == "" {
		return ""
	}
	if filepath.IsAbs(t.ImageVerify.Key) {
		return t.ImageVerify.Key
	}
	return filepath.Join(filepath.Dir(t.Path), t.ImageVerify.Key)
}

func (v *validator) checkImageVerify(iv *ImageVerify) {
	if strings.TrimSpace(iv.Key) == "" {
		v.add("$.image_verify", "key is required (the cosign public key file)")
	}
	for k := range iv.Annotations {
		if strings.TrimSpace(k) == "" {
			v.add("$.image_verify.annotations", "an annotation name is empty")
		}
	}
}
