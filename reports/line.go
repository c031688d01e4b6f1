package reports

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLine bounds one value shown on a terminal or log line, in runes.
const maxLine = 500

// Line makes untrusted text (a probe's detail, a reason quoting it, a
// sandbox's error) safe for one terminal or CI-log line: newlines, tabs,
// carriage returns and every other control, separator or invisible
// formatting character (ESC, BEL, NUL, bidi overrides, zero-width spaces)
// are written as Go escapes (\n, \x1b, \u202e), invalid UTF-8 as \ufffd,
// and the result is cut to maxLine runes. A sandbox can then neither end
// the line early (forging a "verdict: PASS" line of its own), move the
// cursor or colour the terminal, nor reorder what a reader sees.
func Line(s string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if n == maxLine {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.In(r, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
