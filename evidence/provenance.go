package evidence

// Provenance is what the harness verified about the sandbox image before any
// sandbox started: the image pinned by digest, its cosign signature checked
// with the target's key (offline: the transparency log is not required) and
// its SBOM. The policy's "immutable approved base" reads it; a run whose
// image failed verification starts no sandbox.
type Provenance struct {
	// ImageRef is the reference the target names.
	ImageRef string `json:"image_ref"`
	// Digest is the manifest digest the registry resolved the reference to.
	Digest string `json:"digest,omitempty"`
	// ImageID is the digest of the verified image's config: the image ID the
	// engine shows once it holds exactly that image (the record's
	// image.digest).
	ImageID string `json:"image_id,omitempty"`
	// Pinned says the reference names a digest, not only a tag.
	Pinned bool `json:"pinned"`
	// Signature is the result of verifying the image's signature.
	Signature ProvenanceSignature `json:"signature"`
	// SBOM is the image's bill of materials (nil when the image was not
	// verified, so never cataloged).
	SBOM *ProvenanceSBOM `json:"sbom,omitempty"`
}

// ProvenanceSignature is one signature check.
type ProvenanceSignature struct {
	// Verified says a signature by the key, naming the image's digest and
	// carrying every required annotation, was found.
	Verified bool `json:"verified"`
	// KeyFingerprint is the sha256 of the public key's DER encoding.
	KeyFingerprint string `json:"key_fingerprint"`
	// Annotations are the annotations the target requires of the signature.
	Annotations map[string]string `json:"annotations,omitempty"`
	// TlogRequired is false: no transparency log is reachable, so
	// verification is key-based. Tlog says so in words for reports.
	TlogRequired bool   `json:"tlog_required"`
	Tlog         string `json:"tlog"`
	// Error is why verification failed (empty when Verified).
	Error string `json:"error,omitempty"`
}

// ProvenanceSBOM is the stored SBOM of the image.
type ProvenanceSBOM struct {
	// Path is the SBOM file, relative to the run's output folder; Digest its
	// sha256; Format its format (spdx-json).
	Path   string `json:"path"`
	Digest string `json:"digest"`
	Format string `json:"format"`
	// Attested says the SBOM came from an attestation verified with the
	// same key; otherwise the harness made it from the verified image.
	Attested bool `json:"attested"`
	// AttestationRequired says the target requires such an attestation.
	AttestationRequired bool `json:"attestation_required"`
	// AttestationError is why no attestation verified (empty if one did).
	AttestationError string `json:"attestation_error,omitempty"`
	// Packages are the components the SBOM lists.
	Packages []ProvenancePackage `json:"packages"`
}

// ProvenancePackage is one component of the image.
type ProvenancePackage struct {
	Name     string   `json:"name"`
	Version  string   `json:"version,omitempty"`
	Licenses []string `json:"licenses,omitempty"`
}
