package canary

import (
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Attribution headers and the User-Agent product a probe sends.
const (
	TokenHeader  = "X-Sandcheck-Token"
	AgentProduct = "sandcheck-probe"
)

// MaxFieldLen bounds every request-derived text field of a Hit, in bytes.
const MaxFieldLen = 512

var (
	tokenPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)
	probePattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)
	viaPattern   = regexp.MustCompile(`^via-[a-z0-9-]{1,28}$`)
)

// attribute returns the token and probe ID a request carries. The header wins
// over the User-Agent; anything malformed is ignored rather than stored, so a
// hit's Token and Probe always have the documented shape.
func attribute(r *http.Request) (token, probe string) {
	if v := r.Header.Get(TokenHeader); v != "" {
		token, probe = splitAttribution(v)
	}
	if token != "" && probe != "" {
		return token, probe
	}
	agentToken, agentProbe := fromAgent(r.UserAgent())
	if token == "" {
		return agentToken, agentProbe
	}
	if agentToken == token {
		probe = agentProbe
	}
	return token, probe
}

// fromAgent finds the sandcheck-probe/<token>/<probe-id> product in a
// User-Agent, which SDKs may surround with their own products.
func fromAgent(ua string) (token, probe string) {
	if len(ua) > MaxFieldLen {
		ua = ua[:MaxFieldLen]
	}
	for _, f := range strings.Fields(ua) {
		rest, ok := strings.CutPrefix(f, AgentProduct+"/")
		if !ok {
			continue
		}
		return splitAttribution(rest)
	}
	return "", ""
}

// splitAttribution parses "<token>", "<token>/<probe-id>" or
// "<token>/<probe-id>/<via>" (the path a probe sent it by, see
// Hit.Via).
func splitAttribution(v string) (token, probe string) {
	token, probe, _ = splitVia(v)
	return token, probe
}

// splitVia is splitAttribution with the path: "" where the attribution
// names none (or a malformed one).
func splitVia(v string) (token, probe, via string) {
	tok, rest, _ := strings.Cut(v, "/")
	if !tokenPattern.MatchString(tok) {
		return "", "", ""
	}
	pr, via, _ := strings.Cut(rest, "/")
	if !probePattern.MatchString(pr) {
		return tok, "", ""
	}
	if !viaPattern.MatchString(via) {
		via = ""
	}
	return tok, pr, via
}

// attributedVia is the path a request's attribution names: the header's,
// else the User-Agent's.
func attributedVia(r *http.Request) string {
	if _, _, via := splitVia(r.Header.Get(TokenHeader)); via != "" {
		return via
	}
	ua := r.UserAgent()
	if len(ua) > MaxFieldLen {
		ua = ua[:MaxFieldLen]
	}
	for _, f := range strings.Fields(ua) {
		if rest, ok := strings.CutPrefix(f, AgentProduct+"/"); ok {
			_, _, via := splitVia(rest)
			return via
		}
	}
	return ""
}

// clip bounds s to MaxFieldLen bytes without ending in a split UTF-8
// sequence; other invalid bytes become U+FFFD so the hit encodes cleanly.
func clip(s string) string {
	if len(s) > MaxFieldLen {
		s = s[:MaxFieldLen]
		for i := 0; i < utf8.UTFMax-1 && len(s) > 0; i++ {
			if r, _ := utf8.DecodeLastRuneInString(s); r != utf8.RuneError {
				break
			}
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
