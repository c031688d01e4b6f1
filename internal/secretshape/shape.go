// Package secretshape holds the secret formats recognisable from a value
// alone, shared by the secrets probes (inside the sandbox) and the output
// gate (on the host), so both call the same thing a secret.
package secretshape

import "regexp"

// Shape is one secret format: its name and the pattern of its value.
type Shape struct {
	Name string
	RE   *regexp.Regexp
}

// Shapes are the issuers' documented prefixes, so a match is rarely innocent.
var Shapes = []Shape{
	{"aws-access-key-id", regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"github-token", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}`)},
	{"github-fine-grained-pat", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`)},
	{"gitlab-token", regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`)},
	{"slack-token", regexp.MustCompile(`\bxox[baprs]-[A-Za-z0-9-]{10,}`)},
	{"sk-api-key", regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`)}, // OpenAI, Anthropic (sk-ant-)
	{"stripe-key", regexp.MustCompile(`\b[sr]k_live_[A-Za-z0-9]{20,}`)},
	{"google-api-key", regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{"private-key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`)},
	{"url-credentials", regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]{3,}@`)},
}

// Find returns the names of the shapes found in b, in Shapes order.
func Find(b []byte) []string {
	var out []string
	for _, s := range Shapes {
		if s.RE.Match(b) {
			out = append(out, s.Name)
		}
	}
	return out
}
