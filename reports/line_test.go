package reports

import (
	"strings"
	"testing"
	"unicode"
)

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"ok: EPERM":              "ok: EPERM",
		"x\nverdict: PASS\n":     `x\nverdict: PASS\n`,
		"\x1b[2Kgreen\x07\x00":   `\x1b[2Kgreen\x07\x00`,
		"a\u202eb\u200bc\u2028d": `a\u202eb\u200bc\u2028d`,
		"bad \xff utf8\r":        `bad \ufffd utf8\r`,
		"tab\there":              `tab\there`,
		"Grüße, 日本":              "Grüße, 日本",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	long := Line(strings.Repeat("a", 2000))
	if n := len([]rune(long)); n != maxLine+1 || !strings.HasSuffix(long, "…") {
		t.Errorf("a long value is %d runes, want %d and an ellipsis", n, maxLine+1)
	}
	for _, r := range Line("\x00\x01\x1b\x7f\u0085\u2029\ufeff") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			t.Errorf("Line left %U", r)
		}
	}
}
