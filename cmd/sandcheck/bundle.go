package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/provenance"
)

func reportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "report",
		Short: "Sign and verify a run's evidence bundle (an in-toto statement signed with a cosign key)",
		Long: `sign lists every file of a run's output folder (run.json with its verdict,
evidence.jsonl, the SBOM, the reports) with its sha256 digest as the subjects
of one in-toto statement, signs it in a DSSE envelope with a cosign key and
writes it to DIR/` + provenance.BundleFile + `. verify checks the signature and
that the folder holds exactly those files with those digests: changing,
removing or adding any file fails.

Exit codes of verify: 0 verified; 1 verification failed; 2 the check could
not be done (missing key, missing or malformed bundle).`,
	}
	var key string
	sign := &cobra.Command{
		Use:   "sign DIR --key cosign.key",
		Short: "Sign the run folder DIR (private key password in $COSIGN_PASSWORD)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := provenance.LoadSigner(key, password())
			if err != nil {
				return harness(err)
			}
			res, err := provenance.SignBundle(args[0], s)
			if err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %d files of run %q with key %s: %s\n", len(res.Files), res.RunID, res.KeyFingerprint, res.Path)
			return nil
		},
	}
	sign.Flags().StringVar(&key, "key", "", "cosign private key file")
	var pub string
	verify := &cobra.Command{
		Use:   "verify DIR --key cosign.pub",
		Short: "Verify the run folder DIR against its signed bundle",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := provenance.LoadVerifier(pub)
			if err != nil {
				return harness(err)
			}
			res, err := provenance.VerifyBundle(args[0], v)
			if err != nil {
				return verifyExit(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified %d files of run %q, signed by key %s; %s\n", len(res.Files), res.RunID, res.KeyFingerprint, res.Tlog)
			return nil
		},
	}
	verify.Flags().StringVar(&pub, "key", "", "cosign public key file")
	c.AddCommand(sign, verify)
	return c
}
