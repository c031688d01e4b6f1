package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandcheck/sandcheck/probes"
)

func TestProbesListShowsUnproven(t *testing.T) {
	var b bytes.Buffer
	if err := listProbes(&b, "table", 100); err != nil {
		t.Fatal(err)
	}
	unproven := 0
	for _, s := range probes.Catalog() {
		if !s.Proven() {
			unproven++
		}
	}
	out := b.String()
	if !strings.Contains(out, "CONTROLS") {
		t.Errorf("no CONTROLS column:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a %d-rune line in a 100-column table: %q", n, line)
		}
		if strings.HasPrefix(line, "fingerprint.runtime ") && !strings.Contains(line, " unproven ") {
			t.Errorf("fingerprint.runtime is not listed as unproven: %q", line)
		}
	}
	if want := fmt.Sprintf("probes, %d unproven", unproven); !strings.Contains(out, want) {
		t.Errorf("no %q summary in:\n%s", want, out)
	}

	b.Reset()
	if err := listProbes(&b, "wide", 0); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "fingerprint.runtime ") && !strings.Contains(line, "unproven: informational") {
			t.Errorf("-o wide: fingerprint.runtime is not listed as unproven with its reason: %q", line)
		}
	}

	b.Reset()
	if err := listProbes(&b, "json", 0); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID       string           `json:"id"`
		Proven   bool             `json:"proven"`
		Unproven *probes.Unproven `json:"unproven"`
	}
	if err := json.Unmarshal(b.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		s, _ := probes.Lookup(r.ID)
		if r.Proven != s.Proven() || (r.Unproven == nil) != s.Proven() {
			t.Errorf("%s: json proven %t unproven %+v, spec proven %t", r.ID, r.Proven, r.Unproven, s.Proven())
		}
	}
}
