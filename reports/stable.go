package reports

import (
	"regexp"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// Per-run values that reach finding text: the run folder the engine makes
// under the temporary directory, the harness's random artifact and
// credential tokens (sc + 12 hex digits), the broker token's hash and its
// measured revocation delay, and run IDs
// (20261203t103508-68d6e947) with the short forms of them the harness
// names its network and sandboxes by.
var (
	runFolderRe = regexp.MustCompile(`(?:/[^\s/()]+)*/sandcheck-run-[0-9]+`)
	tokenRe     = regexp.MustCompile(`\bsc[0-9a-f]{12}\b`)
	runIDRe     = regexp.MustCompile(`\b[0-9]{8}t[0-9]{6}-[0-9a-f]{8}\b`)
	// The broker's per-task token, named by its hash, and the delay the
	// harness measured before the broker stopped serving it: a new token
	// and a few milliseconds more or less each run, the same finding.
	tokenHashRe = regexp.MustCompile(`\(sha256 [0-9a-f]{16,64}\)`)
	delayRe     = regexp.MustCompile(`\b[0-9]+ms after\b`)
)

// stableText is finding text with every per-run value replaced by a
// placeholder, so that an identity built from it (a SARIF fingerprint) is a
// function of the target, the probe and the finding's meaning, never of a
// run's temporary names: code scanning then keeps one alert, and its
// dismissal, across scheduled runs.
func stableText(rec *evidence.Record, s string) string {
	if id := rec.RunID; id != "" {
		s = strings.ReplaceAll(s, id, "<run>")
		// The network and sandbox names carry the run ID's first twelve
		// characters, lower-cased (netharness.shortID).
		if short := strings.ToLower(id); len(short) > 12 {
			s = strings.ReplaceAll(s, "sandcheck-"+short[:12], "sandcheck-<run>")
		}
	}
	s = runFolderRe.ReplaceAllString(s, "<run-folder>")
	s = tokenRe.ReplaceAllString(s, "<token>")
	s = tokenHashRe.ReplaceAllString(s, "(sha256 <token>)")
	s = delayRe.ReplaceAllString(s, "<measured>ms after")
	return runIDRe.ReplaceAllString(s, "<run>")
}
