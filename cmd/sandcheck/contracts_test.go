package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaOf compiles one of the published schemas.
func schemaOf(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	path := filepath.Join("..", "..", "policies", "schema", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(path, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

func validateFile(t *testing.T, s *jsonschema.Schema, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// What the commands write matches the schemas they are published with: a
// re-graded run.json (with its verdict) and risks.json, and diff -o json
// in both directions (empty lists, not null, when nothing changed).
func TestOutputsMatchPublishedSchemas(t *testing.T) {
	const runs = "../../policies/testdata/"
	out := t.TempDir()
	if code, msg := exitOf(t, policyEvalCmd(), "--input", runs+"weak.run.json", "--out-dir", out, "-o", "json", "-o", "risks"); code != exitFail {
		t.Fatalf("policy eval of the weak run: exit %d: %s", code, msg)
	}
	validateFile(t, schemaOf(t, "run.schema.json"), filepath.Join(out, "run.json"))
	validateFile(t, schemaOf(t, "risks.schema.json"), filepath.Join(out, "risks.json"))

	diff := schemaOf(t, "diff.schema.json")
	for name, args := range map[string][]string{
		"regressed": {runs + "hardened.run.json", runs + "weak.run.json"},
		"fixed":     {runs + "weak.run.json", runs + "hardened.run.json"},
		"same":      {runs + "hardened.run.json", runs + "hardened.run.json"},
	} {
		file := filepath.Join(out, name+".diff.json")
		if code, msg := exitOf(t, diffCmd(), append([]string{"-o", "json=" + file}, args...)...); code != exitPass {
			t.Fatalf("%s: exit %d: %s", name, code, msg)
		}
		validateFile(t, diff, file)
	}
}
