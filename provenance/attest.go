package provenance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/cosign/attestation"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/cosign/v2/pkg/types"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
)

// SPDXPredicate is the in-toto predicate type of an SPDX SBOM attestation.
const SPDXPredicate = "https://spdx.dev/Document"

// AttestSBOM attaches sbom (SPDX JSON) to the image ref names as an in-toto
// statement in a DSSE envelope signed with s, as `cosign attest --type
// spdxjson --key` does, with no transparency log upload.
func AttestSBOM(ctx context.Context, ref name.Digest, s *Signer, sbom []byte) error {
	if _, err := ParseSBOM(sbom); err != nil {
		return fmt.Errorf("attesting %s: %w", ref, err)
	}
	st, err := attestation.GenerateStatement(attestation.GenerateOpts{
		Predicate: bytes.NewReader(sbom),
		Type:      "spdxjson",
		Digest:    ref.DigestStr()[len("sha256:"):],
		Repo:      ref.Repository.String(),
	})
	if err != nil {
		return fmt.Errorf("attesting %s: %w", ref, err)
	}
	pl, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("attesting %s: %w", ref, err)
	}
	env, err := sigdsse.WrapSigner(s, types.IntotoPayloadType).SignMessage(bytes.NewReader(pl))
	if err != nil {
		return fmt.Errorf("attesting %s: signing: %w", ref, err)
	}
	att, err := static.NewAttestation(env)
	if err != nil {
		return fmt.Errorf("attesting %s: %w", ref, err)
	}
	se, err := ociremote.SignedEntity(ref, ociOpts(ctx)...)
	if err != nil {
		return fmt.Errorf("attesting %s: %w", ref, registryError(err))
	}
	se, err = mutate.AttachAttestationToEntity(se, att)
	if err != nil {
		return fmt.Errorf("attesting %s: %w", ref, err)
	}
	if err := ociremote.WriteAttestations(ref.Repository, se, ociOpts(ctx)...); err != nil {
		return fmt.Errorf("attesting %s: writing attestation: %w", ref, registryError(err))
	}
	return nil
}

// VerifySBOMAttestation finds the SPDX SBOM attested for the image ref names
// by v's key and returns it (as the attestation carries it). An image with
// no attestation by that key yields an error wrapping ErrFailed.
func VerifySBOMAttestation(ctx context.Context, ref name.Digest, v *Verifier) ([]byte, error) {
	co := &cosign.CheckOpts{
		RegistryClientOpts: ociOpts(ctx),
		SigVerifier:        v.Verifier,
		ClaimVerifier:      cosign.IntotoSubjectClaimVerifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		Offline:            true,
	}
	atts, _, err := cosign.VerifyImageAttestations(ctx, ref, co)
	if err != nil {
		var none *cosign.ErrNoSignaturesFound
		var nomatch *cosign.ErrNoMatchingAttestations
		if errors.As(err, &none) || errors.As(err, &nomatch) {
			return nil, fmt.Errorf("%w: image %s has no SBOM attestation by key %s: %v", ErrFailed, ref, v.Fingerprint, err)
		}
		return nil, fmt.Errorf("verifying the SBOM attestation of %s: %w", ref, registryError(err))
	}
	for _, a := range atts {
		p, err := a.Payload()
		if err != nil {
			return nil, fmt.Errorf("reading the SBOM attestation of %s: %w", ref, err)
		}
		sbom, ok, err := spdxPredicate(p)
		if err != nil {
			return nil, fmt.Errorf("reading the SBOM attestation of %s: %w", ref, err)
		}
		if ok {
			return sbom, nil
		}
	}
	return nil, fmt.Errorf("%w: image %s has attestations by key %s but none of an SPDX SBOM", ErrFailed, ref, v.Fingerprint)
}

// spdxPredicate unpacks a verified DSSE envelope; ok is false when its
// statement is not an SPDX one.
func spdxPredicate(envelope []byte) (sbom []byte, ok bool, err error) {
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, false, fmt.Errorf("%w envelope: %v", ErrMalformed, err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, false, fmt.Errorf("%w envelope payload: %v", ErrMalformed, err)
	}
	var st struct {
		PredicateType string          `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, false, fmt.Errorf("%w statement: %v", ErrMalformed, err)
	}
	if st.PredicateType != SPDXPredicate {
		return nil, false, nil
	}
	if _, err := ParseSBOM(st.Predicate); err != nil {
		return nil, false, err
	}
	return st.Predicate, true, nil
}
