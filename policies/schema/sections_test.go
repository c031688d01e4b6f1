package schema

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandcheck/sandcheck/runners"
	_ "github.com/sandcheck/sandcheck/runners/all"
)

var update = flag.Bool("update", false, "rewrite target.schema.json with the runners' schema fragments put in place")

// A runner that owns its section holds its schema fragment; the target
// schema is the fragments put in place (the runner's name among runner's
// values, its section's key, the keys a target of it requires and its
// definitions), and each fragment names exactly its configuration's keys.
// A runner added with its fragment is put in with -update.
func TestTargetSchemaHoldsRunnerFragments(t *testing.T) {
	_, doc := compile(t, "target.schema.json")
	plugins := runners.Plugins()
	if len(plugins) == 0 {
		t.Fatal("no runner registered through runners.RegisterPlugin")
	}
	want := jsonCopy(t, doc)
	for _, p := range plugins {
		frag := fragment(t, p)
		put(t, want, p.Name, frag)
		def, _ := frag["$defs"].(map[string]any)[p.Name].(map[string]any)
		if def == nil {
			t.Errorf("%s: its schema fragment has no $defs.%s", p.Name, p.Name)
			continue
		}
		if got, keys := schemaKeys(t, def), yamlKeys(reflect.TypeOf(p.Config).Elem()); !slices.Equal(got, keys) {
			t.Errorf("%s: schema fragment keys %v, configuration keys %v", p.Name, got, keys)
		}
	}
	if reflect.DeepEqual(doc, want) {
		return
	}
	if !*update {
		t.Fatal("target.schema.json does not hold the runners' schema fragments as they are: run go test ./policies/schema -run TestTargetSchemaHoldsRunnerFragments -update")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("target.schema.json", b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fragment(t *testing.T, p runners.Plugin) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(p.Schema))
	if err != nil {
		t.Fatalf("%s: schema fragment: %v", p.Name, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: schema fragment is not an object", p.Name)
	}
	return m
}

// put writes one runner's fragment into the target schema.
func put(t *testing.T, doc map[string]any, name string, frag map[string]any) {
	t.Helper()
	props := doc["properties"].(map[string]any)
	runner := props["runner"].(map[string]any)
	if enum := runner["enum"].([]any); !slices.Contains(enum, any(name)) {
		runner["enum"] = append(enum, name)
	}
	props[name] = map[string]any{"$ref": "#/$defs/" + name}
	cond := map[string]any{
		"if":   map[string]any{"properties": map[string]any{"runner": map[string]any{"const": name}}},
		"then": map[string]any{"required": frag["required"]},
	}
	all, _ := doc["allOf"].([]any)
	i := slices.IndexFunc(all, func(c any) bool {
		r, _ := jsonPath(c, "if", "properties", "runner", "const").(string)
		return r == name
	})
	if i < 0 {
		all = append(all, cond)
	} else {
		all[i] = cond
	}
	doc["allOf"] = all
	defs := doc["$defs"].(map[string]any)
	for k, v := range frag["$defs"].(map[string]any) {
		defs[k] = v
	}
}

func jsonPath(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func jsonCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return c.(map[string]any)
}
