package probes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Result is the JSON object the probe binary writes on stdout, one per line, for
// each probe it ran. It is written by code inside the sandbox, so the host treats
// it as hostile: see ParseResults.
type Result struct {
	// Probe is the catalog ID of the probe that ran.
	Probe string `json:"probe"`
	// Outcome is what the probe concluded.
	Outcome Outcome `json:"outcome"`
	// Evidence holds what the probe observed, as short key/value facts
	// (an errno, a path, a count). Values never carry secrets.
	Evidence map[string]string `json:"evidence,omitempty"`
	// Detail is one human sentence explaining the outcome.
	Detail string `json:"detail,omitempty"`
}

// Limits on what the host accepts from a probe.
const (
	MaxResultLine    = 16 << 10 // bytes in one JSON line
	MaxEvidenceKeys  = 32
	MaxEvidenceValue = 512
	MaxDetail        = 1024
	MaxResults       = 256 // results in one probe invocation
)

var (
	idPattern  = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9_-]*)+$`)
	keyPattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
)

// ErrMalformed marks probe output the host refuses to believe.
var ErrMalformed = errors.New("malformed probe output")

// Validate checks one result against the limits and the allowed vocabulary.
func (r Result) Validate() error {
	if !idPattern.MatchString(r.Probe) {
		return fmt.Errorf("%w: probe id %q", ErrMalformed, truncate(r.Probe, 80))
	}
	if !r.Outcome.Valid() {
		return fmt.Errorf("%w: outcome %q of %s", ErrMalformed, truncate(string(r.Outcome), 40), r.Probe)
	}
	if len(r.Evidence) > MaxEvidenceKeys {
		return fmt.Errorf("%w: %d evidence keys in %s (max %d)", ErrMalformed, len(r.Evidence), r.Probe, MaxEvidenceKeys)
	}
	for k, v := range r.Evidence {
		if !keyPattern.MatchString(k) {
			return fmt.Errorf("%w: evidence key %q in %s", ErrMalformed, truncate(k, 80), r.Probe)
		}
		if len(v) > MaxEvidenceValue {
			return fmt.Errorf("%w: evidence %s of %s is %d bytes (max %d)", ErrMalformed, k, r.Probe, len(v), MaxEvidenceValue)
		}
	}
	if len(r.Detail) > MaxDetail {
		return fmt.Errorf("%w: detail of %s is %d bytes (max %d)", ErrMalformed, r.Probe, len(r.Detail), MaxDetail)
	}
	return nil
}

// ParseResults reads probe output strictly: one JSON object per non-empty line,
// no unknown fields, no trailing data, each line and the count bounded. Any
// violation rejects the whole output, so a forged line cannot hide among good
// ones.
func ParseResults(r io.Reader) ([]Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxResultLine)
	var out []Result
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(out) == MaxResults {
			return nil, fmt.Errorf("%w: more than %d results", ErrMalformed, MaxResults)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var res Result
		if err := dec.Decode(&res); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: line %d: trailing data", ErrMalformed, line)
		}
		if err := res.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
