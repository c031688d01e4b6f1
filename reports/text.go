package reports

import (
	"strings"
	"unicode"
)

// plain makes untrusted text safe to show as text: invalid UTF-8, control
// characters (but newline and tab) and invisible formatting characters
// (bidi overrides, zero-width spaces, line and paragraph separators) become
// U+FFFD, so a detail cannot reorder or hide what a reader sees.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.In(r, unicode.Zl, unicode.Zp):
			return '\uFFFD'
		}
		return r
	}, strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\r\n", "\n"))
}
