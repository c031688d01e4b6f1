// Package schema holds the JSON Schemas sandcheck publishes: run.schema.json
// (a run record, the policy's input) and target.schema.json (a target file).
// Its tests check the repository's target files and stored runs against
// them, and the target schema against the parser's own fields.
package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandcheck/sandcheck/targets"
)

func compile(t *testing.T, file string) (*jsonschema.Schema, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatalf("compiling %s: %v", file, err)
	}
	return s, doc.(map[string]any)
}

// yamlDoc reads a YAML file as the JSON value a schema validates.
func yamlDoc(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// Every target file in the repository is valid against target.schema.json,
// and targets.Load accepts it too.
func TestTargetFilesMatchSchema(t *testing.T) {
	s, _ := compile(t, "target.schema.json")
	files, _ := filepath.Glob("../../fixtures/targets/*.yaml")
	more, _ := filepath.Glob("../../examples/targets/*.yaml")
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("found only %d target files", len(files))
	}
	for _, f := range files {
		if err := s.Validate(yamlDoc(t, f)); err != nil {
			t.Errorf("%s does not match target.schema.json: %v", f, err)
		}
		if _, err := targets.Load(f); err != nil {
			t.Errorf("%s: targets.Load: %v", f, err)
		}
	}
}

// The schema rejects what the parser rejects: a misspelled key, an unknown
// profile, a docker runner without its section, a wrong type.
func TestTargetSchemaRejects(t *testing.T) {
	s, _ := compile(t, "target.schema.json")
	base := "schema: sandcheck.dev/target/v1\nname: t\nrunner: docker\nimage: i\nprofile: high-risk-code\n"
	for name, doc := range map[string]string{
		"misspelled key":   base + "docker:\n  runtime: runc\n  cap_drops: [ALL]\n",
		"unknown profile":  strings.Replace(base, "high-risk-code", "high-risk", 1) + "docker: {runtime: runc}\n",
		"no docker":        base,
		"wrong type":       base + "docker: {runtime: runc, pids_limit: lots}\n",
		"bad egress":       base + "docker: {runtime: runc, egress: some}\n",
		"relative tmpfs":   base + "docker: {runtime: runc, tmpfs: [{path: tmp, size: 1Mi}]}\n",
		"other schema":     strings.Replace(base, "target/v1", "target/v2", 1) + "docker: {runtime: runc}\n",
		"unknown top key":  base + "docker: {runtime: runc}\nnetwork: none\n",
		"bad ulimit name":  base + "docker: {runtime: runc, ulimits: [{name: files, soft: 1, hard: 1}]}\n",
		"gated no release": base + "docker: {runtime: runc}\noutput: {path: /out}\n",
	} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err := s.Validate(v); err == nil {
			t.Errorf("%s: accepted:\n%s", name, doc)
		}
	}
}

// yamlKeys lists the YAML keys of a struct type.
func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	sort.Strings(out)
	return out
}

func schemaKeys(t *testing.T, node map[string]any) []string {
	t.Helper()
	props, ok := node["properties"].(map[string]any)
	if !ok {
		t.Fatalf("schema node has no properties: %v", node)
	}
	var out []string
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The schema names exactly the keys the parser reads, section by section,
// so neither drifts from the other (a field added to targets needs its
// line in target.schema.json).
func TestTargetSchemaMatchesParser(t *testing.T) {
	_, doc := compile(t, "target.schema.json")
	defs := doc["$defs"].(map[string]any)
	for _, c := range []struct {
		name string
		node map[string]any
		typ  any
	}{
		{"target", doc, targets.Target{}},
		{"docker", defs["docker"].(map[string]any), targets.Docker{}},
		{"tmpfs", defs["tmpfs"].(map[string]any), targets.Tmpfs{}},
		{"ulimit", defs["ulimit"].(map[string]any), targets.Ulimit{}},
		{"mount", defs["mount"].(map[string]any), targets.Mount{}},
		{"device", defs["device"].(map[string]any), targets.Device{}},
		{"output", defs["output"].(map[string]any), targets.Output{}},
		{"inputs", defs["inputs"].(map[string]any), targets.Inputs{}},
	} {
		want := yamlKeys(reflect.TypeOf(c.typ))
		if got := schemaKeys(t, c.node); !slices.Equal(got, want) {
			t.Errorf("%s: schema keys %v, parser keys %v", c.name, got, want)
		}
	}
	names := doc["$defs"].(map[string]any)["ulimit"].(map[string]any)["properties"].(map[string]any)["name"].(map[string]any)["enum"]
	var got []string
	for _, n := range names.([]any) {
		got = append(got, n.(string))
	}
	if !slices.Equal(got, targets.UlimitNames) {
		t.Errorf("ulimit names %v, parser %v", got, targets.UlimitNames)
	}
}

// Stored run records (the policy fixtures and the full runs the reports
// test with) are valid against run.schema.json.
func TestStoredRunsMatchRunSchema(t *testing.T) {
	s, _ := compile(t, "run.schema.json")
	files, _ := filepath.Glob("../testdata/*.run.json")
	more, _ := filepath.Glob("../../reports/testdata/*.run.json")
	files = append(files, more...)
	if len(files) < 4 {
		t.Fatalf("found only %d stored runs", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s does not match run.schema.json: %v", f, err)
		}
	}
	var bad map[string]any
	json.Unmarshal([]byte(`{"schema":"sandcheck.dev/run/v1"}`), &bad)
	if err := s.Validate(bad); err == nil {
		t.Error("run.schema.json accepts a record without results")
	}
}
