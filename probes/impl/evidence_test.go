package impl

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandcheck/sandcheck/probes"
)

func TestFinishMakesValidResults(t *testing.T) {
	many := ev{}
	for i := 0; i < 50; i++ {
		many.set(fmt.Sprintf("k%02d", i), "v")
	}
	tests := []struct {
		name string
		in   probes.Result
	}{
		{"bad keys", probes.Result{Outcome: probes.Blocked, Evidence: ev{"/proc/keys": "x", "Upper Case": "y", "9lead": "z", "": "e"}}},
		{"long value", probes.Result{Outcome: probes.Escaped, Evidence: ev{"v": strings.Repeat("é", 600)}}},
		{"invalid utf8 and controls", probes.Result{Outcome: probes.Escaped, Evidence: ev{"v": "a\xffb\x00c\nd"}, Detail: strings.Repeat("x", 5000)}},
		{"too many keys", probes.Result{Outcome: probes.Escaped, Evidence: many}},
		{"bad outcome", probes.Result{Outcome: "maybe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			r.Probe = "host.bind-mounts"
			r = finish(r)
			if err := r.Validate(); err != nil {
				t.Fatalf("finish left an invalid result: %v", err)
			}
			for k, v := range r.Evidence {
				if !utf8.ValidString(v) || strings.ContainsAny(v, "\x00\n") {
					t.Errorf("evidence %s = %q still has invalid bytes", k, v)
				}
			}
		})
	}
}

func TestFinishReportsDroppedKeys(t *testing.T) {
	e := ev{}
	for i := 0; i < 40; i++ {
		e.set(fmt.Sprintf("k%02d", i), "v")
	}
	r := finish(probes.Result{Probe: "a.b", Outcome: probes.Escaped, Evidence: e})
	if len(r.Evidence) != probes.MaxEvidenceKeys || r.Evidence["evidence_dropped"] != "9" {
		t.Fatalf("got %d keys, evidence_dropped=%q; want %d keys and 9 dropped", len(r.Evidence), r.Evidence["evidence_dropped"], probes.MaxEvidenceKeys)
	}
}

func TestJoinCapped(t *testing.T) {
	tests := []struct {
		items []string
		max   int
		want  string
	}{
		{nil, 100, ""},
		{[]string{"a", "b"}, 100, "a, b"},
		{[]string{"aaaa", "bbbb", "cccc"}, 20, "aaaa, ... (+2 more)"},
		{[]string{strings.Repeat("x", 30)}, 20, "... (+1 more)"},
	}
	for _, tt := range tests {
		got := joinCapped(tt.items, tt.max)
		if got != tt.want || len(got) > tt.max {
			t.Errorf("joinCapped(%q, %d) = %q, want %q", tt.items, tt.max, got, tt.want)
		}
	}
}
