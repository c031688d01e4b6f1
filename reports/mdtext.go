package reports

import (
	"strings"
)

// maxCell caps the runes of one record string in Markdown; run.json keeps
// the whole text.
const maxCell = 300

// code renders untrusted text as a Markdown code span, the one inline
// construct in which nothing is interpreted: no HTML, links, autolinks,
// emphasis, @mentions or issue references. Line breaks, control and
// invisible formatting characters (bidi overrides, zero-width) become
// U+FFFD or a space, and long text is cut. inTable replaces "|" with "¦":
// a GFM table splits cells on "|" even inside a code span, and "\|" is no
// safe escape there (a preceding backslash pairs with the escape's and
// frees the pipe).
func code(s string, inTable bool) string {
	s = sanitize(s)
	if s == "" {
		return ""
	}
	if inTable {
		s = strings.ReplaceAll(s, "|", "¦")
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	// One space each side: stripped by the renderer, and it keeps a
	// leading or trailing backtick off the fence.
	return fence + " " + s + " " + fence
}

// cell is code for a table cell.
func cell(s string) string { return code(s, true) }

func sanitize(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range plain(s) {
		if n == maxCell {
			b.WriteRune('…')
			break
		}
		n++
		if r == '\n' || r == '\t' {
			r = ' '
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}
