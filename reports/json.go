package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sandcheck/sandcheck/evidence"
)

// JSON writes the record itself, indented: this is run.json, the input of
// grading and of every other report. HTML-sensitive characters stay escaped
// (\u003c) so the file is safe to embed in a web page.
type JSON struct{}

var _ Writer = JSON{}

// Format returns "json".
func (JSON) Format() string { return "json" }

// Write writes rec as indented JSON followed by a newline.
func (JSON) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing json: record is nil")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return fmt.Errorf("writing json: %w", err)
	}
	return nil
}
