package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// In a CI log (not a terminal) the console prints plain lines, only for
// probes that did not do what the profile expects unless verbose, and
// nothing per probe when quiet.
func TestConsoleProgress(t *testing.T) {
	ok := evidence.Result{Probe: "host.a", Outcome: probes.Blocked, Expected: probes.Blocked}
	bad := evidence.Result{Probe: "host.b", Outcome: probes.Escaped, Expected: probes.Blocked}
	for _, tc := range []struct {
		name           string
		verbose, quiet bool
		want           []string
	}{
		{"ci", false, false, []string{"[ 2/12]    3.5s escaped        host.b (expected blocked)"}},
		{"verbose", true, false, []string{"[ 1/12]    1.2s blocked        host.a", "[ 2/12]    3.5s escaped        host.b (expected blocked)"}},
		{"quiet", false, true, nil},
	} {
		var b bytes.Buffer
		p := newConsole(&b, tc.verbose, tc.quiet).progress()
		p(1, 12, ok, 1200*time.Millisecond)
		p(2, 12, bad, 3500*time.Millisecond)
		out := b.String()
		if strings.Contains(out, "\x1b[") {
			t.Errorf("%s: colour escapes outside a terminal: %q", tc.name, out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" {
			lines = nil
		}
		if len(lines) != len(tc.want) {
			t.Fatalf("%s: %d lines %q, want %d", tc.name, len(lines), out, len(tc.want))
		}
		for i, w := range tc.want {
			if strings.Join(strings.Fields(lines[i]), " ") != strings.Join(strings.Fields(w), " ") {
				t.Errorf("%s: line %q, want %q", tc.name, lines[i], w)
			}
		}
	}
}
