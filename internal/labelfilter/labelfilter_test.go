package labelfilter

import (
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

// labelSets are the specs the expressions are tried on.
var labelSets = [][]string{
	nil,
	{"egress"},
	{"privilege", "slow"},
	{"privilege", "high"},
	{"Egress", "canary", "needs-root"},
	{"host", "bounded", "slow", "critical"},
	{"teardown", "own-sandbox"},
}

// TestSameAsGinkgo checks each expression selects exactly what Ginkgo's own
// parser selects, so the CLI and `ginkgo ./suites` agree.
func TestSameAsGinkgo(t *testing.T) {
	exprs := []string{
		"egress",
		"EGRESS",
		" egress ",
		"!slow",
		"privilege && !slow",
		"privilege&&!slow",
		"egress || host",
		"egress, host",
		"egress || host && slow",
		"(egress || host) && slow",
		"!(egress || host)",
		"!!slow",
		"!privilege && !slow || canary",
		"privilege && (slow || high) && !egress",
		"/^pri/",
		"/^pri/ && !slow",
		"/e/ || /o/",
		"((((egress))))",
		"egress && needs-root && canary",
		"own-sandbox || bounded, high",
	}
	for _, e := range exprs {
		want, err := types.ParseLabelFilter(e)
		if err != nil {
			t.Fatalf("ginkgo rejects %q (fix the test): %v", e, err)
		}
		got, err := Parse(e)
		if err != nil {
			t.Errorf("Parse(%q): %v", e, err)
			continue
		}
		for _, ls := range labelSets {
			if g, w := got(ls), want(ls); g != w {
				t.Errorf("%q on %v: selected %v, ginkgo %v", e, ls, g, w)
			}
		}
	}
}

// TestRejects checks malformed expressions are errors, as they are for
// Ginkgo, so a typo never selects everything or nothing in silence.
func TestRejects(t *testing.T) {
	for _, e := range []string{
		"egress &",
		"egress & host",
		"egress | host",
		"&& egress",
		"egress ||",
		"(egress",
		"egress)",
		"()",
		"egress !host",
		"(egress) host",
		"!",
		"/[/",
	} {
		if _, err := types.ParseLabelFilter(e); err == nil {
			t.Fatalf("ginkgo accepts %q (fix the test)", e)
		}
		if _, err := Parse(e); err == nil {
			t.Errorf("Parse(%q) accepted a malformed expression", e)
		} else if !strings.Contains(err.Error(), "label filter") && !strings.Contains(err.Error(), "set operations") {
			t.Errorf("Parse(%q): error %q does not say what it parsed", e, err)
		}
	}
}

// TestEmpty checks an empty expression selects everything.
func TestEmpty(t *testing.T) {
	for _, e := range []string{"", "  "} {
		f, err := Parse(e)
		if err != nil {
			t.Fatalf("Parse(%q): %v", e, err)
		}
		for _, ls := range labelSets {
			if !f(ls) {
				t.Errorf("Parse(%q) left out %v", e, ls)
			}
		}
	}
}

// TestUnterminatedRegexp checks a regexp without its closing slash is an
// error (Ginkgo reads it to the end of the input).
func TestUnterminatedRegexp(t *testing.T) {
	if _, err := Parse("egress && /slo"); err == nil || !strings.Contains(err.Error(), "closing") {
		t.Errorf("Parse of an unterminated regexp: %v, want an error about the closing '/'", err)
	}
}

// TestTwoWords checks two labels with only a blank between them are an
// error: Ginkgo reads them as one label that no spec carries, which would
// select nothing.
func TestTwoWords(t *testing.T) {
	if _, err := Parse("egress host"); err == nil || !strings.Contains(err.Error(), "without an operator") {
		t.Errorf("Parse(\"egress host\"): %v, want an error about the missing operator", err)
	}
}

// TestSetOperations checks Ginkgo's key:value set operations are refused
// with a reason rather than read as a label.
func TestSetOperations(t *testing.T) {
	for _, e := range []string{"key: containsAny a", "egress && env:prod"} {
		if _, err := Parse(e); err == nil || !strings.Contains(err.Error(), "set operations") {
			t.Errorf("Parse(%q): %v, want a refusal of set operations", e, err)
		}
	}
}
