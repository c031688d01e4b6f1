package provenance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/targets"
)

// SBOMFile is the name of the image's SBOM in a run's output folder.
const SBOMFile = "sbom.spdx.json"

// Check verifies the image a target names before anything starts and
// returns what it found as the record's provenance section: the reference
// resolved to a digest, the signature checked with the target's key, and,
// once the signature holds, the SBOM (from an attestation by the same key,
// else cataloged from the verified image) written to outDir. A failed
// verification is not an error: the section says what failed and the
// policy grades it. An error means the check could not be done (a bad
// reference, a missing key, a registry that is down, a malformed
// signature or SBOM).
func Check(ctx context.Context, t *targets.Target, outDir string) (*evidence.Provenance, error) {
	iv := t.ImageVerify
	if iv == nil {
		return nil, errors.New("checking image: the target has no image_verify section")
	}
	ref, err := ParseRef(t.Image)
	if err != nil {
		return nil, fmt.Errorf("checking image: %w", err)
	}
	v, err := LoadVerifier(t.KeyPath())
	if err != nil {
		return nil, fmt.Errorf("checking image: %w", err)
	}
	p := &evidence.Provenance{
		ImageRef: t.Image,
		Signature: evidence.ProvenanceSignature{
			KeyFingerprint: v.Fingerprint,
			Annotations:    iv.Annotations,
			Tlog:           TlogNotRequired,
		},
	}
	_, p.Pinned = ref.(name.Digest)
	res, err := VerifyImage(ctx, ref, v, iv.Annotations)
	if res != nil {
		p.Digest = res.Digest
	}
	switch {
	case errors.Is(err, ErrFailed):
		p.Signature.Error = err.Error()
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("checking image: %w", err)
	}
	p.Signature.Verified = true
	dig := ref.Context().Digest(res.Digest)
	if p.ImageID, err = ConfigDigest(ctx, dig); err != nil {
		return nil, fmt.Errorf("checking image: %w", err)
	}
	sb := &evidence.ProvenanceSBOM{Format: SBOMFormat, AttestationRequired: iv.RequireSBOMAttestation}
	sbom, err := VerifySBOMAttestation(ctx, dig, v)
	switch {
	case err == nil:
		sb.Attested = true
	case errors.Is(err, ErrFailed):
		sb.AttestationError = err.Error()
		if sbom, err = GenerateSBOM(ctx, dig); err != nil {
			return nil, fmt.Errorf("checking image: %w", err)
		}
	default:
		return nil, fmt.Errorf("checking image: %w", err)
	}
	pkgs, err := ParseSBOM(sbom)
	if err != nil {
		return nil, fmt.Errorf("checking image: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("checking image: %w", err)
	}
	sb.Path = SBOMFile
	if err := os.WriteFile(filepath.Join(outDir, SBOMFile), sbom, 0o644); err != nil {
		return nil, fmt.Errorf("checking image: writing SBOM: %w", err)
	}
	sb.Digest = Digest(sbom)
	sb.Packages = make([]evidence.ProvenancePackage, 0, len(pkgs))
	for _, pk := range pkgs {
		sb.Packages = append(sb.Packages, evidence.ProvenancePackage(pk))
	}
	p.SBOM = sb
	return p, nil
}
