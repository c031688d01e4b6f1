package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// A stored record with a not-tested result is valid input, and its grade
// never passes: the criterion of a probe that did not run is unconfirmed.
func TestNotTestedRecord(t *testing.T) {
	b, err := os.ReadFile("testdata/hardened.run.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec evidence.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Verdict = nil
	rec.Results[0].Outcome, rec.Results[0].Detail = probes.NotTested, "runner bare lacks what the probe needs: residue"
	b, err = json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("a record with a not-tested result refused: %v", err)
	}
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Grade(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	crit := rec.Results[0].Criterion
	for _, c := range v.Criteria {
		if c.ID == crit && c.Status != evidence.StatusUnconfirmed {
			t.Errorf("criterion %s: %s, want unconfirmed", c.ID, c.Status)
		}
	}
	if v.Pass {
		t.Error("the record passed with a probe not tested")
	}
}
