package policies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sandcheck/sandcheck/evidence"
)

// MaxRecordSize bounds a stored run record read for re-grading.
const MaxRecordSize = 64 << 20

// DecodeRecord reads a stored run record (run.json) strictly: unknown
// fields, trailing data and a record past MaxRecordSize are errors, and the
// record must match the published input schema.
func DecodeRecord(r io.Reader) (*evidence.Record, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading run record: %w", err)
	}
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("reading run record: larger than %d bytes", MaxRecordSize)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("reading run record: the file is empty (no JSON record)")
	}
	if err := ValidateInput(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rec evidence.Record
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("decoding run record: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding run record: trailing data after the record")
	}
	return &rec, nil
}
