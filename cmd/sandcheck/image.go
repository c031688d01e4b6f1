package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/provenance"
)

// verifyExit maps a provenance error to the exit code: 1 when the thing
// checked did not verify, 2 when the check could not be done.
func verifyExit(err error) error {
	if errors.Is(err, provenance.ErrFailed) {
		return &exitError{code: exitFail, err: err}
	}
	return harness(err)
}

func password() []byte { return []byte(os.Getenv(provenance.PasswordEnv)) }

func parseAnnotations(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--annotation %q: want key=value", kv)
		}
		m[k] = v
	}
	return m, nil
}

func imageCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Sign, verify and catalog sandbox images (cosign keys, syft SBOMs; offline)",
		Long: `Images live in a registry on loopback (see 'sandcheck registry serve').
Signing and verification use cosign key pairs (the private key's password in
$COSIGN_PASSWORD) and work offline: no transparency log and no certificate
authority is used, and every verification says the transparency log was not
required.

Exit codes of verify: 0 verified; 1 verification failed (unsigned, signed by
another key, missing annotation); 2 the check could not be done (registry
down, missing key, malformed signature).`,
	}
	c.AddCommand(imageKeygenCmd(), imagePushCmd(), imageSignCmd(), imageVerifyCmd(), imageSBOMCmd())
	return c
}

func imageKeygenCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "keygen --dir DIR",
		Short: "Write a new cosign key pair (cosign.key, cosign.pub) to DIR (made, mode 0700, when missing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return harness(fmt.Errorf("key folder: %w", err))
			}
			priv, pub, err := provenance.GenerateKeys(dir, password())
			if err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "private key %s\npublic key %s\n", priv, pub)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", ".", "folder for the key pair")
	return c
}

func imagePushCmd() *cobra.Command {
	var pull bool
	c := &cobra.Command{
		Use:   "push LOCAL DEST",
		Short: "Copy an image the Docker engine holds to a loopback registry; prints DEST pinned by digest",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			dig, err := provenance.PushLocal(ctx, args[0], args[1])
			if err != nil {
				return harness(err)
			}
			if pull {
				if err := provenance.PullToEngine(ctx, dig); err != nil {
					return harness(err)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), dig.String())
			return nil
		},
	}
	c.Flags().BoolVar(&pull, "pull", false, "have the Docker engine pull the image back by digest")
	return c
}

func imageSignCmd() *cobra.Command {
	var (
		key    string
		anns   []string
		attest bool
	)
	c := &cobra.Command{
		Use:   "sign REF --key cosign.key",
		Short: "Sign an image (and with --attest-sbom, attest its SBOM) with a cosign key, no transparency log",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ann, err := parseAnnotations(anns)
			if err != nil {
				return harness(err)
			}
			s, err := provenance.LoadSigner(key, password())
			if err != nil {
				return harness(err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			dig, err := resolveArg(ctx, args[0])
			if err != nil {
				return harness(err)
			}
			if err := provenance.SignImage(ctx, dig, s, ann); err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s with key %s\n", dig, s.Fingerprint)
			if attest {
				sbom, err := provenance.GenerateSBOM(ctx, dig)
				if err != nil {
					return harness(err)
				}
				if err := provenance.AttestSBOM(ctx, dig, s, sbom); err != nil {
					return harness(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "attested SBOM %s of %s\n", provenance.Digest(sbom), dig)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&key, "key", "", "cosign private key file (password in $COSIGN_PASSWORD)")
	f.StringArrayVarP(&anns, "annotation", "a", nil, "key=value annotation to sign into the payload (repeatable)")
	f.BoolVar(&attest, "attest-sbom", false, "also catalog the image with syft and attest the SBOM with the same key")
	return c
}

// resolveArg parses a loopback image reference and pins it by the digest
// the registry serves.
func resolveArg(ctx context.Context, s string) (name.Digest, error) {
	ref, err := provenance.ParseRef(s)
	if err != nil {
		return name.Digest{}, err
	}
	return provenance.Resolve(ctx, ref)
}

func imageVerifyCmd() *cobra.Command {
	var (
		key  string
		anns []string
		sbom bool
	)
	c := &cobra.Command{
		Use:   "verify REF --key cosign.pub",
		Short: "Verify an image's cosign signature (and with --sbom its SBOM attestation) offline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ann, err := parseAnnotations(anns)
			if err != nil {
				return harness(err)
			}
			v, err := provenance.LoadVerifier(key)
			if err != nil {
				return harness(err)
			}
			ref, err := provenance.ParseRef(args[0])
			if err != nil {
				return harness(err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			res, err := provenance.VerifyImage(ctx, ref, v, ann)
			if err != nil {
				return verifyExit(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "verified %s: %d signature(s) by key %s\n", res.Digest, res.Signatures, res.KeyFingerprint)
			printAnnotations(w, res.Annotations)
			fmt.Fprintf(w, "%s\n", res.Tlog)
			if !res.Pinned {
				fmt.Fprintf(w, "note: %s is a tag; run targets must pin the digest: %s\n", args[0], ref.Context().Digest(res.Digest))
			}
			if sbom {
				b, err := provenance.VerifySBOMAttestation(ctx, ref.Context().Digest(res.Digest), v)
				if err != nil {
					return verifyExit(err)
				}
				pk, err := provenance.ParseSBOM(b)
				if err != nil {
					return harness(err)
				}
				fmt.Fprintf(w, "verified SBOM attestation %s: %d packages\n", provenance.Digest(b), len(pk))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&key, "key", "", "cosign public key file")
	f.StringArrayVarP(&anns, "annotation", "a", nil, "key=value the signature must carry (repeatable)")
	f.BoolVar(&sbom, "sbom", false, "also require an SBOM attestation by the same key")
	return c
}

func printAnnotations(w io.Writer, m map[string]string) {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(w, "  annotation %s=%s\n", k, m[k])
	}
}

func imageSBOMCmd() *cobra.Command {
	var out string
	var list bool
	c := &cobra.Command{
		Use:   "sbom REF|file:PATH [-o FILE]",
		Short: "Catalog an image in a loopback registry, or a local file (an image archive or a binary), with syft; writes SPDX JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			var b []byte
			if path, ok := strings.CutPrefix(args[0], "file:"); ok {
				var err error
				if b, err = provenance.GenerateFileSBOM(ctx, path); err != nil {
					return harness(err)
				}
			} else {
				dig, err := resolveArg(ctx, args[0])
				if err != nil {
					return harness(err)
				}
				if b, err = provenance.GenerateSBOM(ctx, dig); err != nil {
					return harness(err)
				}
			}
			if list {
				pk, err := provenance.ParseSBOM(b)
				if err != nil {
					return harness(err)
				}
				for _, p := range pk {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", p, strings.Join(p.Licenses, ","))
				}
			}
			if out == "" || out == "-" {
				if list {
					return nil
				}
				_, err := cmd.OutOrStdout().Write(b)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return harness(err)
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%s)\n", out, provenance.Digest(b))
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "SBOM file (default: standard output)")
	c.Flags().BoolVar(&list, "list", false, "print one package a line (name@version, licenses)")
	return c
}
