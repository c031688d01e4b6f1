package policies

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RunSchema is the JSON Schema of the policy input (the run record), as
// published in docs/policy.md.
//
//go:embed schema/run.schema.json
var RunSchema []byte

const runSchemaURL = "https://sandcheck.dev/schema/run/v1/run.schema.json"

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

func compiledSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(RunSchema))
		if err != nil {
			schemaErr = fmt.Errorf("reading run schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(runSchemaURL, doc); err != nil {
			schemaErr = fmt.Errorf("adding run schema: %w", err)
			return
		}
		schema, schemaErr = c.Compile(runSchemaURL)
	})
	return schema, schemaErr
}

// ErrSchema is wrapped by ValidateInput when a record does not match the
// input schema.
var ErrSchema = errors.New("run record does not match the input schema")

// ValidateInput checks a JSON document against the published input schema.
func ValidateInput(b []byte) error {
	s, err := compiledSchema()
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("decoding run record: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return nil
}
