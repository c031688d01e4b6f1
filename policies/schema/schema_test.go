// Package schema holds the JSON Schemas sandcheck publishes: run.schema.json
// (a run record, the policy's input, with its verdict), target.schema.json (a
// target file), risks.schema.json (the residual-risk register) and
// diff.schema.json (`diff -o json`). Its tests check the repository's target
// files, stored runs and risk registers against them, and the target schema
// against the parser's own fields.
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

	"github.com/sandcheck/sandcheck/runners"
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
// profile or runner, a runner without its section (or docker and
// opensandbox without an image), a wrong type, a value out of a section's
// vocabulary.
func TestTargetSchemaRejects(t *testing.T) {
	s, _ := compile(t, "target.schema.json")
	base := "schema: sandcheck.dev/target/v1\nname: t\nrunner: docker\nimage: i\nprofile: high-risk-code\n"
	base2 := func(runner string) string { return strings.Replace(base, "runner: docker", "runner: "+runner, 1) }
	noImage := func(runner string) string { return strings.Replace(base2(runner), "image: i\n", "", 1) }
	for name, doc := range map[string]string{
		"misspelled key":       base + "docker:\n  runtime: runc\n  cap_drops: [ALL]\n",
		"unknown profile":      strings.Replace(base, "high-risk-code", "high-risk", 1) + "docker: {runtime: runc}\n",
		"no docker":            base,
		"wrong type":           base + "docker: {runtime: runc, pids_limit: lots}\n",
		"bad egress":           base + "docker: {runtime: runc, egress: some}\n",
		"relative tmpfs":       base + "docker: {runtime: runc, tmpfs: [{path: tmp, size: 1Mi}]}\n",
		"other schema":         strings.Replace(base, "target/v1", "target/v2", 1) + "docker: {runtime: runc}\n",
		"unknown top key":      base + "docker: {runtime: runc}\nnetwork: none\n",
		"bad ulimit name":      base + "docker: {runtime: runc, ulimits: [{name: files, soft: 1, hard: 1}]}\n",
		"gated no release":     base + "docker: {runtime: runc}\noutput: {path: /out}\n",
		"docker no image":      strings.Replace(base, "image: i\n", "", 1) + "docker: {runtime: runc}\n",
		"unknown runner":       strings.Replace(base, "runner: docker", "runner: podman", 1),
		"docker host key":      base + "docker: {runtime: runc, ipc: shared}\n",
		"bad volume":           base + "docker: {runtime: runc, volumes: [{name: v, target: data}]}\n",
		"oom score":            base + "docker: {runtime: runc, oom_score_adj: 2000}\n",
		"CAP_ prefix":          base + "docker: {runtime: runc, cap_add: [CAP_SYS_ADMIN]}\n",
		"reserved env":         base + "docker: {runtime: runc, env: {SANDCHECK_X: y}}\n",
		"no bwrap":             noImage("bwrap"),
		"bwrap no tmp":         noImage("bwrap") + "bwrap: {host_user: '0', network: harness, tmpfs: [{path: /scratch, size: 1Mi}]}\n",
		"bwrap no userns":      noImage("bwrap") + "bwrap: {host_user: '1000', network: harness, tmpfs: [{path: /tmp, size: 1Mi}]}\n",
		"bwrap none no net":    noImage("bwrap") + "bwrap: {host_user: '0', unshare: [pid], network: none, tmpfs: [{path: /tmp, size: 1Mi}]}\n",
		"bwrap namespace":      noImage("bwrap") + "bwrap: {host_user: '0', unshare: [mnt], network: harness, tmpfs: [{path: /tmp, size: 1Mi}]}\n",
		"bwrap limits key":     noImage("bwrap") + "bwrap: {host_user: '0', network: harness, tmpfs: [{path: /tmp, size: 1Mi}], limits: {pids: 1}}\n",
		"no process":           noImage("process"),
		"process host net":     noImage("process") + "process: {network: host}\n",
		"command no exec":      base2("command") + "command: {create: [c], copy_in: [c], destroy: [c], network: none}\n",
		"command no argv":      base2("command") + "command: {create: [c], exec: [c, x], copy_in: [c], destroy: [c], network: none}\n",
		"command var prog":     base2("command") + "command: {create: ['${IMAGE}'], exec: [c, '${ARGV}'], copy_in: [c], destroy: [c], network: none}\n",
		"command timeout":      base2("command") + "command: {create: [c], exec: [c, '${ARGV}'], copy_in: [c], destroy: [c], network: none, timeout: soon}\n",
		"gateway ephemeral":    base2("gateway") + "gateway: {url: 'http://h:1', admin_key_env: K, runtime_profile: ephemeral-task, task_response: {exit_code: e, stdout: o}}\n",
		"gateway path":         base2("gateway") + "gateway: {url: 'http://h:1/api', admin_key_env: K, runtime_profile: session, task_response: {exit_code: e, stdout: o}}\n",
		"gateway no map":       base2("gateway") + "gateway: {url: 'http://h:1', admin_key_env: K, runtime_profile: session}\n",
		"opensandbox no image": noImage("opensandbox") + "opensandbox: {url: 'http://h:1/v1'}\n",
		"opensandbox short":    base2("opensandbox") + "opensandbox: {url: 'http://h:1/v1', timeout: 30}\n",
		"opensandbox policy":   base2("opensandbox") + "opensandbox: {url: 'http://h:1/v1', network_policy: {default_action: block}}\n",
		"verify no key":        base + "docker: {runtime: runc}\nimage_verify: {annotations: {a: b}}\n",
	} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err := s.Validate(v); err == nil {
			t.Errorf("%s: accepted:\n%s", name, doc)
		}
		if _, err := targets.Parse("t.yaml", []byte(doc)); err == nil {
			t.Errorf("%s: the parser accepts it, the schema should too:\n%s", name, doc)
		}
	}
}

// A minimal target of each runner, and docker's host settings, are valid
// for both the schema and the parser.
func TestTargetSchemaAccepts(t *testing.T) {
	s, _ := compile(t, "target.schema.json")
	h := "schema: sandcheck.dev/target/v1\nname: t\nprofile: high-risk-code\n"
	for name, doc := range map[string]string{
		"bwrap":   h + "runner: bwrap\nbwrap: {host_user: '0', network: harness, tmpfs: [{path: /tmp, size: 1Mi}], limits: {pids_limit: 1}}\n",
		"bwrapns": h + "runner: bwrap\nbwrap: {host_user: '1000', unshare: [user, net, uts], hostname: x, network: none, tmpfs: [{path: /tmp, size: 1Mi}]}\n",
		"process": h + "runner: process\nprocess: {network: none}\n",
		"command": h + "runner: command\nimage: i\ncommand: {create: [c], exec: [c, '${ARGV}'], copy_in: [c], destroy: [c], network: none, timeout: 1m30s}\n",
		"gateway": h + "runner: gateway\ngateway: {url: 'http://h:1', admin_key_env: K, runtime_profile: session, task_response: {exit_code: e, stdout: o}}\n",
		"os":      h + "runner: opensandbox\nimage: i\nopensandbox: {url: 'http://h:1/v1', timeout: 0, resources: {cpu: 500m, memory: 1Gi}, network_policy: {default_action: deny, egress: [{action: allow, target: pypi.org}]}}\n",
		"dockerh": h + "runner: docker\nimage: i\ndocker: {runtime: runc, network: none, ipc: host, privileged: true, sysctls: {net.ipv4.ip_forward: '1'}, group_add: [audio, '44'], volumes: [{name: v1, target: /data}], extra_hosts: ['h:1.2.3.4'], oom_score_adj: -500, cpu_shares: 2, cpuset_cpus: '0-1', init: true}\nimage_verify: {key: k.pem}\n",
	} {
		j, _ := yaml.YAMLToJSON([]byte(doc))
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err := s.Validate(v); err != nil {
			t.Errorf("%s: schema: %v", name, err)
		}
		if _, err := targets.Parse("t.yaml", []byte(doc)); err != nil {
			t.Errorf("%s: parser: %v", name, err)
		}
	}
}

// yamlKeys lists the YAML keys of a struct type, the keys of an inlined
// struct (`yaml:",inline"`) included.
func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case tag == "" && slices.Contains(strings.Split(opts, ","), "inline"):
			out = append(out, yamlKeys(f.Type)...)
		case tag != "" && tag != "-":
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
		{"volume", defs["volume"].(map[string]any), targets.Volume{}},
		{"output", defs["output"].(map[string]any), targets.Output{}},
		{"inputs", defs["inputs"].(map[string]any), targets.Inputs{}},
		{"tasks", defs["tasks"].(map[string]any), targets.Tasks{}},
		{"limits", defs["limits"].(map[string]any), targets.Limits{}},
		{"command", defs["command"].(map[string]any), targets.Command{}},
		{"gateway", defs["gateway"].(map[string]any), targets.Gateway{}},
		{"gateway_task_response", defs["gateway_task_response"].(map[string]any), targets.TaskResponse{}},
		{"gateway_host", defs["gateway_host"].(map[string]any), targets.GatewayHost{}},
		{"kubernetes", defs["kubernetes"].(map[string]any), targets.Kubernetes{}},
		{"kubernetes_pool", defs["kubernetes_pool"].(map[string]any), targets.Pool{}},
		{"kubernetes_toleration", defs["kubernetes_toleration"].(map[string]any), targets.Toleration{}},
		{"opensandbox", defs["opensandbox"].(map[string]any), targets.OpenSandbox{}},
		{"opensandbox_resources", defs["opensandbox_resources"].(map[string]any), targets.OpenSandboxResources{}},
		{"opensandbox_policy", defs["opensandbox_policy"].(map[string]any), targets.OpenSandboxPolicy{}},
		{"opensandbox_rule", defs["opensandbox_rule"].(map[string]any), targets.OpenSandboxRule{}},
		{"image_verify", defs["image_verify"].(map[string]any), targets.ImageVerify{}},
	} {
		want := yamlKeys(reflect.TypeOf(c.typ))
		if c.name == "target" {
			// The runners that own their sections add their keys (their
			// fragments: TestTargetSchemaHoldsRunnerFragments).
			for _, p := range runners.Plugins() {
				want = append(want, p.Name)
			}
			sort.Strings(want)
		}
		if got := schemaKeys(t, c.node); !slices.Equal(got, want) {
			t.Errorf("%s: schema keys %v, parser keys %v", c.name, got, want)
		}
	}
	// The vocabularies the parser exports are the schema's enums.
	enum := func(node any) []string {
		var out []string
		for _, n := range node.(map[string]any)["enum"].([]any) {
			out = append(out, n.(string))
		}
		return out
	}
	prop := func(def, key string) any {
		return defs[def].(map[string]any)["properties"].(map[string]any)[key]
	}
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"ulimit names", enum(prop("ulimit", "name")), targets.UlimitNames},
		{"docker egress", enum(prop("docker", "egress")), targets.EgressProfiles},
		{"command egress", enum(prop("command", "egress")), targets.EgressProfiles},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s %v, parser %v", c.name, c.got, c.want)
		}
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

	// The verdict is constrained in full: a stored run with its verdict
	// edited each way must be refused.
	b, err := os.ReadFile("../../reports/testdata/full-weak.run.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(v map[string]any){
		"pass not a boolean": func(v map[string]any) { v["pass"] = "definitely" },
		"unknown status":     func(v map[string]any) { v["criteria"].([]any)[0].(map[string]any)["status"] = "fine" },
		"unknown outcome":    func(v map[string]any) { v["results"].([]any)[0].(map[string]any)["effective"] = "safe" },
		"no criteria":        func(v map[string]any) { delete(v, "criteria") },
		"an extra key":       func(v map[string]any) { v["override"] = true },
	} {
		var rec map[string]any
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		edit(rec["verdict"].(map[string]any))
		if err := s.Validate(rec); err == nil {
			t.Errorf("run.schema.json accepts a verdict with %s", name)
		}
	}
}

func TestRiskRegistersMatchSchema(t *testing.T) {
	s, _ := compile(t, "risks.schema.json")
	files, _ := filepath.Glob("../../reports/testdata/*.risks.json")
	if len(files) < 3 {
		t.Fatalf("found only %d stored risk registers", len(files))
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
			t.Errorf("%s does not match risks.schema.json: %v", f, err)
		}
	}
	var bad any
	json.Unmarshal([]byte(`{"schema":"sandcheck.dev/risks/v1","run_id":"r","target":"t","risks":[{"id":"x","title":"X","exposure":"e","accepted":false,"owner":"o","criterion":"c"}]}`), &bad)
	if err := s.Validate(bad); err == nil {
		t.Error("risks.schema.json accepts an open risk that does not say why")
	}
}
