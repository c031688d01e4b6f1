package probes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParamsSchema names the one version of Params this build writes and reads.
const ParamsSchema = "sandcheck.dev/probe-params/v1"

// MaxParamsBytes bounds an encoded Params document.
const MaxParamsBytes = 64 << 10

// PackBounds bound the gated release's packing of the output folder.
type PackBounds struct {
	MaxFiles      int   `json:"max_files"`
	MaxFileBytes  int64 `json:"max_file_bytes"`
	MaxTotalBytes int64 `json:"max_total_bytes"`
}

// Encode writes p as its wire document, with the schema set.
func (p Params) Encode() (string, error) {
	p.Schema = ParamsSchema
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding probe parameters: %w", err)
	}
	if len(b) > MaxParamsBytes {
		return "", fmt.Errorf("encoding probe parameters: %d bytes, over %d", len(b), MaxParamsBytes)
	}
	return string(b), nil
}

// ParseParams reads one wire document strictly: one JSON object of at most
// MaxParamsBytes, this schema exactly, no unknown field, nothing after it.
// Checking the values themselves is the reader's job.
func ParseParams(doc []byte) (Params, error) {
	var p Params
	if len(doc) > MaxParamsBytes {
		return p, fmt.Errorf("probe parameters: %d bytes, over %d", len(doc), MaxParamsBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Params{}, fmt.Errorf("probe parameters: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Params{}, errors.New("probe parameters: data after the document")
	}
	if p.Schema != ParamsSchema {
		return Params{}, fmt.Errorf("probe parameters: schema %q, want %q", p.Schema, ParamsSchema)
	}
	return p, nil
}

// ArgvParams reads the parameters of a probe binary's command line (the
// value after --params), strictly as ParseParams does. ok is false when the
// command line carries no --params.
func ArgvParams(argv []string) (p Params, ok bool, err error) {
	for i, a := range argv {
		if a == "--params" {
			if i+1 == len(argv) {
				return Params{}, true, errors.New("probe parameters: --params has no value")
			}
			p, err := ParseParams([]byte(argv[i+1]))
			return p, true, err
		}
	}
	return Params{}, false, nil
}
