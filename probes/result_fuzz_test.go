package probes

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseResults: whatever a probe binary prints, the parser returns valid
// results or an error wrapping ErrMalformed (or naming a line), never panics,
// and never accepts more than MaxResults.
func FuzzParseResults(f *testing.F) {
	f.Add([]byte(`{"probe":"syscalls.bpf","outcome":"blocked","detail":"EPERM","evidence":{"errno":"EPERM(1)"}}` + "\n"))
	f.Add([]byte("\n\n{\"probe\":\"x\"}\n"))
	f.Add([]byte(`{"probe":"syscalls.bpf","outcome":"escaped"} {"a":1}`))
	f.Add([]byte(`{"probe":"syscalls.bpf","outcome":"blocked","unknown":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := ParseResults(bytes.NewReader(b))
		if err != nil {
			if rs != nil {
				t.Fatalf("results %v with error %v", rs, err)
			}
			return
		}
		if len(rs) > MaxResults {
			t.Fatalf("%d results", len(rs))
		}
		for _, r := range rs {
			if err := r.Validate(); err != nil {
				t.Fatalf("accepted an invalid result %+v: %v", r, err)
			}
		}
		_ = errors.Is(err, ErrMalformed)
	})
}
