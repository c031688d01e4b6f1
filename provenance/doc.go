// Package provenance proves what a sandbox runs: it serves an OCI registry on
// loopback, pushes locally built images there and reads them back by digest,
// signs and verifies images with cosign keys (offline: no transparency log
// and no certificate authority; every result says the log was not
// required), makes SBOMs of images with syft and attests them with the same
// key, and signs and verifies a run's evidence bundle as an in-toto
// statement.
//
// Errors that wrap ErrFailed mean the thing checked did not verify (an
// unsigned image, a wrong key, a changed byte); every other error means the
// check itself could not be done (a registry that is down, a missing key, a
// malformed signature or SBOM). Callers map the first to exit code 1 and the
// second to exit code 2 and never confuse them.
package provenance

import "errors"

// ErrFailed is wrapped by every verification failure.
var ErrFailed = errors.New("verification failed")

// ErrMalformed is wrapped when a signature, envelope or SBOM cannot be
// parsed: the harness could not check it (not a verification failure).
var ErrMalformed = errors.New("malformed")
