package provenance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// TlogNotRequired is what every verification result says about the
// transparency log: none is reachable here, so verification is key-based
// and the log is explicitly not required.
const TlogNotRequired = "transparency log not required (offline, key-based verification: no Rekor, no Fulcio)"

func ociOpts(ctx context.Context) []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(remoteOpts(ctx)...)}
}

// SignImage signs the image ref names (by digest) with s, as `cosign sign
// --key` does (a simple-signing payload carrying annotations, stored beside
// the image under the sha256-<digest>.sig tag), with no transparency log
// upload.
func SignImage(ctx context.Context, ref name.Digest, s *Signer, annotations map[string]string) error {
	ann := map[string]any{}
	for k, v := range annotations {
		ann[k] = v
	}
	if len(ann) == 0 {
		ann = nil
	}
	pl, err := payload.Cosign{Image: ref, Annotations: ann}.MarshalJSON()
	if err != nil {
		return fmt.Errorf("signing %s: %w", ref, err)
	}
	raw, err := s.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return fmt.Errorf("signing %s: %w", ref, err)
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return fmt.Errorf("signing %s: %w", ref, err)
	}
	se, err := ociremote.SignedEntity(ref, ociOpts(ctx)...)
	if err != nil {
		return fmt.Errorf("signing %s: %w", ref, registryError(err))
	}
	se, err = mutate.AttachSignatureToEntity(se, sig)
	if err != nil {
		return fmt.Errorf("signing %s: %w", ref, err)
	}
	if err := ociremote.WriteSignatures(ref.Repository, se, ociOpts(ctx)...); err != nil {
		return fmt.Errorf("signing %s: writing signature: %w", ref, registryError(err))
	}
	return nil
}

// Verification is what VerifyImage established.
type Verification struct {
	// Ref is the reference as given; Digest what the registry resolved it to.
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Pinned says the reference named a digest (not only a tag).
	Pinned bool `json:"pinned"`
	// Signatures is how many signatures verified with the key.
	Signatures int `json:"signatures"`
	// KeyFingerprint is the sha256 of the public key's DER encoding.
	KeyFingerprint string `json:"key_fingerprint"`
	// Annotations are the annotations required of (and found in) the
	// signature.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Tlog says the transparency log was not required.
	Tlog string `json:"tlog"`
}

// VerifyImage checks that the image ref names carries at least one
// signature made by v's key whose payload names the image's digest and
// repository and carries every annotation in want. An image with no such signature yields
// an error wrapping ErrFailed; a registry that cannot be reached, an image
// it does not hold or signatures that are all malformed yield other errors.
func VerifyImage(ctx context.Context, ref name.Reference, v *Verifier, want map[string]string) (*Verification, error) {
	dig, err := Resolve(ctx, ref)
	if err != nil {
		return nil, registryError(err)
	}
	res := &Verification{Ref: ref.String(), Digest: dig.DigestStr(), KeyFingerprint: v.Fingerprint, Tlog: TlogNotRequired}
	_, res.Pinned = ref.(name.Digest)
	if len(want) > 0 {
		res.Annotations = want
	}
	if err := checkWellFormed(ctx, dig); err != nil {
		return res, err
	}
	var ann map[string]any
	if len(want) > 0 {
		ann = map[string]any{}
		for k, val := range want {
			ann[k] = val
		}
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: ociOpts(ctx),
		SigVerifier:        v.Verifier,
		ClaimVerifier:      repositoryClaimVerifier(dig.Repository),
		Annotations:        ann,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		Offline:            true,
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, dig, co)
	if err != nil {
		var none *cosign.ErrNoSignaturesFound
		var nomatch *cosign.ErrNoMatchingSignatures
		switch {
		case errors.As(err, &none):
			return res, fmt.Errorf("%w: image %s is not signed", ErrFailed, dig)
		case errors.As(err, &nomatch):
			return res, fmt.Errorf("%w: image %s has no signature by key %s with the required annotations: %v", ErrFailed, dig, v.Fingerprint, err)
		}
		return res, fmt.Errorf("verifying %s: %w", dig, registryError(err))
	}
	res.Signatures = len(sigs)
	return res, nil
}

// repositoryClaimVerifier is cosign's simple claim check (the digest, the
// annotations) plus the one cosign leaves to its callers: the payload's
// critical.identity.docker-reference names the repository being verified.
// Without it a signature copied with its image into another repository
// (same digest) would verify there, vouching for a name nobody signed.
func repositoryClaimVerifier(repo name.Repository) func(oci.Signature, v1.Hash, map[string]any) error {
	return func(sig oci.Signature, h v1.Hash, ann map[string]any) error {
		if err := cosign.SimpleClaimVerifier(sig, h, ann); err != nil {
			return err
		}
		p, err := sig.Payload()
		if err != nil {
			return fmt.Errorf("reading the signed payload: %w", err)
		}
		var sci payload.SimpleContainerImage
		if err := json.Unmarshal(p, &sci); err != nil {
			return fmt.Errorf("reading the signed payload: %w", err)
		}
		claimed := sci.Critical.Identity.DockerReference
		// A claim is a repository (what cosign writes) or a reference in
		// it (repo:tag, repo@digest); only its repository is compared, the
		// digest having been checked above.
		cr, err := name.ParseReference(claimed)
		if err != nil {
			return fmt.Errorf("the signature's docker-reference %q is not an image reference, so it does not name repository %s", truncateClaim(claimed), repo.Name())
		}
		if cr.Context().Name() != repo.Name() {
			return fmt.Errorf("the signature was made for repository %s, not %s (a signature copied with its image vouches only for the name it was signed under)", cr.Context().Name(), repo.Name())
		}
		return nil
	}
}

// truncateClaim bounds a claim from a signature payload before it goes into
// an error.
func truncateClaim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// checkWellFormed reads the image's signatures: when there are some and not
// one parses (base64 signature, simple-signing JSON payload), the harness
// cannot judge them, which is not the same as a signature by another key.
func checkWellFormed(ctx context.Context, dig name.Digest) error {
	st, err := ociremote.SignatureTag(dig, ociOpts(ctx)...)
	if err != nil {
		return fmt.Errorf("reading signatures of %s: %w", dig, err)
	}
	sigs, err := ociremote.Signatures(st, ociOpts(ctx)...)
	if err != nil {
		return fmt.Errorf("reading signatures of %s: %w", dig, registryError(err))
	}
	sl, err := sigs.Get()
	if err != nil {
		return fmt.Errorf("reading signatures of %s: %w", dig, registryError(err))
	}
	var problems []string
	for i, s := range sl {
		if err := wellFormed(s); err != nil {
			problems = append(problems, fmt.Sprintf("signature %d: %v", i, err))
		}
	}
	if len(sl) > 0 && len(problems) == len(sl) {
		sort.Strings(problems)
		return fmt.Errorf("%w signatures on %s: %v", ErrMalformed, dig, problems)
	}
	return nil
}

func wellFormed(s oci.Signature) error {
	b64, err := s.Base64Signature()
	if err != nil {
		return err
	}
	if _, err := base64.StdEncoding.DecodeString(b64); err != nil || b64 == "" {
		return fmt.Errorf("signature is not base64")
	}
	p, err := s.Payload()
	if err != nil {
		return err
	}
	var sci payload.SimpleContainerImage
	if err := json.Unmarshal(p, &sci); err != nil {
		return fmt.Errorf("payload is not simple-signing JSON: %w", err)
	}
	return nil
}

// registryError names an unreachable registry or a missing image plainly.
func registryError(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("the registry does not hold it: %w", err)
	}
	return err
}
