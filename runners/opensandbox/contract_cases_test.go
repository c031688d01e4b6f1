package opensandbox

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

const contractOrigin = "http://127.0.0.1:8080"

// synth is an exchange as the recorder would keep it.
func synth(t *testing.T, method, url string, hdr map[string]string, body any, status int, respCT string, resp any) exchange {
	t.Helper()
	ex := exchange{Method: method, URL: url, ReqHeader: http.Header{}, Status: status, RespHeader: http.Header{}}
	for k, v := range hdr {
		ex.ReqHeader.Set(k, v)
	}
	switch b := body.(type) {
	case nil:
	case string:
		ex.ReqBody = []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		ex.ReqBody = raw
		ex.ReqHeader.Set("Content-Type", "application/json")
	}
	if respCT != "" {
		ex.RespHeader.Set("Content-Type", respCT)
	}
	switch b := resp.(type) {
	case nil:
	case string:
		ex.RespBody = []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		ex.RespBody = raw
	}
	return ex
}

var (
	keyHdr  = map[string]string{"OPEN-SANDBOX-API-KEY": "k", "Accept": "application/json"}
	created = map[string]any{"id": "abc", "status": map[string]any{"state": "Pending"},
		"createdAt": "2026-12-04T22:00:00Z", "entrypoint": []string{"tail", "-f", "/dev/null"}}
	goodCreate = map[string]any{"image": map[string]string{"uri": "busybox"}, "entrypoint": []string{"sh"},
		"resourceLimits": map[string]string{"cpu": "1", "memory": "2Gi"}, "timeout": 600,
		"metadata": map[string]string{"sandcheck.name": "probe-1"}}
	execdBase = "http://10.1.2.3:44772"
	execdHdr  = map[string]string{"X-EXECD-ACCESS-TOKEN": "tok"}
)

// with is goodCreate changed by f.
func with(f func(m map[string]any)) map[string]any {
	raw, _ := json.Marshal(goodCreate)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	f(m)
	return m
}

// contractWithEndpoint is a contract that has seen an endpoint answer
// naming execdBase with execdHdr, and an init event naming "cmd-1".
func contractWithEndpoint(t *testing.T) *contract {
	c := newContract(t, contractOrigin+"/v1")
	ep := synth(t, "GET", contractOrigin+"/v1/sandboxes/abc/endpoints/44772", keyHdr, nil, 200, "application/json",
		map[string]any{"endpoint": strings.TrimPrefix(execdBase, "http://"), "headers": execdHdr})
	if p := c.check([]exchange{ep}); len(p) > 0 {
		t.Fatalf("the endpoint answer itself fails: %v", p)
	}
	c.commandIDs["cmd-1"] = true
	return c
}

// TestContractRejects is the contract's own control: known-good exchanges
// pass, and each known-bad one, fed through the same check, is refused for
// the reason named. A check that let any of these through could not fail.
func TestContractRejects(t *testing.T) {
	hdr := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range execdHdr {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	stream := "{\"type\":\"init\",\"text\":\"cmd-2\",\"timestamp\":1}\n\n{\"type\":\"stdout\",\"text\":\"hi\",\"timestamp\":2}\n\n{\"type\":\"execution_complete\",\"execution_time\":3,\"timestamp\":3}\n\n"
	good := []exchange{
		synth(t, "GET", contractOrigin+"/health", nil, nil, 200, "application/json", map[string]string{"status": "healthy"}),
		synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr, goodCreate, 202, "application/json", created),
		synth(t, "GET", contractOrigin+"/v1/sandboxes?metadata=sandcheck.name%3Dprobe-1&pageSize=100", keyHdr, nil, 200, "application/json",
			map[string]any{"items": []any{}, "pagination": map[string]any{"page": 1, "pageSize": 100, "totalItems": 0, "totalPages": 0, "hasNextPage": false}}),
		synth(t, "DELETE", contractOrigin+"/v1/sandboxes/abc", keyHdr, nil, 204, "", nil),
		synth(t, "GET", contractOrigin+"/v1/sandboxes/abc", keyHdr, nil, 404, "application/json", map[string]string{"code": "NOT_FOUND", "message": "gone"}),
		synth(t, "GET", execdBase+"/ping", execdHdr, nil, 200, "", nil),
		synth(t, "POST", execdBase+"/command", execdHdr, map[string]any{"command": "true", "background": true, "uid": 0}, 200, "text/event-stream", stream),
		synth(t, "DELETE", execdBase+"/command?id=cmd-1", execdHdr, nil, 200, "", nil),
	}
	c := contractWithEndpoint(t)
	if p := c.check(good); len(p) > 0 {
		t.Fatalf("known-good exchanges refused (the check is wrong, or the documents changed):\n%s", strings.Join(p, "\n"))
	}
	// An endpoint that names no token (upstream's default) waives execd's
	// AccessToken scheme for its address only.
	tokenless := newContract(t, contractOrigin+"/v1")
	noTok := []exchange{
		synth(t, "GET", contractOrigin+"/v1/sandboxes/abc/endpoints/44772", keyHdr, nil, 200, "application/json", map[string]any{"endpoint": "10.7.7.7:44772"}),
		synth(t, "GET", "http://10.7.7.7:44772/ping", nil, nil, 200, "", nil),
	}
	if p := tokenless.check(noTok); len(p) > 0 {
		t.Errorf("a tokenless endpoint's execd call refused: %v", p)
	}
	if p := contractWithEndpoint(t).check(noTok[1:]); len(p) == 0 {
		t.Error("a call to an address no endpoint named passed")
	}
	long := strings.Repeat("a", 64)
	cases := []struct {
		name string
		ex   exchange
		want string
	}{
		{"create without resourceLimits", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { delete(m, "resourceLimits") }), 0, "", nil), "no resourceLimits"},
		{"64-character label value", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["metadata"] = map[string]string{"task": long} }), 0, "", nil), "not a Kubernetes label value"},
		{"label value with a space", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["metadata"] = map[string]string{"task": "a b"} }), 0, "", nil), "not a Kubernetes label value"},
		{"reserved metadata key", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["metadata"] = map[string]string{"opensandbox.io/id": "x"} }), 0, "", nil), "reserved opensandbox.io/ prefix"},
		{"timeout null", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["timeout"] = nil }), 0, "", nil), `"timeout": null`},
		{"timeout under 60 (schema)", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["timeout"] = 30 }), 0, "", nil), "request:"},
		{"resourceLimits value not a string (schema)", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["resourceLimits"] = map[string]any{"cpu": 1} }), 0, "", nil), "request:"},
		{"unknown image field (schema)", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { m["image"] = map[string]any{"uri": "x", "digest": "y"} }), 0, "", nil), "request:"},
		{"image without entrypoint", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) { delete(m, "entrypoint") }), 0, "", nil), "without an entrypoint"},
		{"network rule with an unknown action (lifecycle and egress schemas)", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr,
			with(func(m map[string]any) {
				m["networkPolicy"] = map[string]any{"defaultAction": "deny", "egress": []any{map[string]string{"action": "log", "target": "x.org"}}}
			}), 0, "", nil), "networkPolicy against egress-api.yaml"},
		{"no API key", synth(t, "GET", contractOrigin+"/v1/sandboxes/abc", nil, nil, 0, "", nil), "OPEN-SANDBOX-API-KEY"},
		{"health under /v1", synth(t, "GET", contractOrigin+"/v1/health", keyHdr, nil, 0, "", nil), "documents no GET /health"},
		{"path outside the base", synth(t, "GET", contractOrigin+"/sandboxes/abc", keyHdr, nil, 0, "", nil), "not under the lifecycle API's declared base"},
		{"endpoint port out of range", synth(t, "GET", contractOrigin+"/v1/sandboxes/abc/endpoints/70000", keyHdr, nil, 0, "", nil), "request:"},
		{"answer with an undocumented status", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr, goodCreate, 201, "application/json", created), "status is not supported"},
		{"create answer with expiresAt not a date-time", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr, goodCreate, 202, "application/json",
			map[string]any{"id": "abc", "status": map[string]any{"state": "Pending"}, "createdAt": "2026-12-04T22:00:00Z", "entrypoint": []string{"sh"}, "expiresAt": "soon"}), "/expiresAt"},
		{"create answer missing createdAt", synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr, goodCreate, 202, "application/json",
			map[string]any{"id": "abc", "status": map[string]any{"state": "Pending"}, "entrypoint": []string{"sh"}}), "response 202"},
		{"endpoint answer with an unknown field", synth(t, "GET", contractOrigin+"/v1/sandboxes/abc/endpoints/44772", keyHdr, nil, 200, "application/json",
			map[string]any{"endpoint": "10.0.0.1:44772", "url": "x"}), "response 200"},
		{"error answer not {code, message}", synth(t, "GET", contractOrigin+"/v1/sandboxes/abc", keyHdr, nil, 404, "application/json",
			map[string]string{"detail": "Not Found"}), "response 404"},
		{"execd without the endpoint's header", synth(t, "GET", execdBase+"/ping", nil, nil, 200, "", nil), "X-EXECD-ACCESS-TOKEN"},
		{"execd at an address no endpoint named", synth(t, "GET", "http://10.9.9.9:44772/ping", execdHdr, nil, 200, "", nil), "no endpoint answer named"},
		{"command without command (schema)", synth(t, "POST", execdBase+"/command", hdr(nil), map[string]any{"background": true}, 0, "", nil), "request:"},
		{"command with a negative uid (schema)", synth(t, "POST", execdBase+"/command", hdr(nil), map[string]any{"command": "x", "uid": -1}, 0, "", nil), "request:"},
		{"command with gid, no uid", synth(t, "POST", execdBase+"/command", hdr(nil), map[string]any{"command": "x", "gid": 5}, 0, "", nil), "gid without uid"},
		{"stream event of an unknown type", synth(t, "POST", execdBase+"/command", hdr(nil), map[string]any{"command": "x"}, 200, "text/event-stream",
			"{\"type\":\"init\",\"text\":\"c\"}\n\n{\"type\":\"bogus\"}\n\n"), "event 1"},
		{"stream event with a string execution_time", synth(t, "POST", execdBase+"/command", hdr(nil), map[string]any{"command": "x"}, 200, "text/event-stream",
			"{\"type\":\"execution_complete\",\"execution_time\":\"3\"}\n\n"), "event 0"},
		{"interrupt of an id execd never gave", synth(t, "DELETE", execdBase+"/command?id=cmd-9", hdr(nil), nil, 200, "", nil), "which no init event gave"},
		{"upload with the file part first", synth(t, "POST", execdBase+"/files/upload",
			hdr(map[string]string{"Content-Type": "multipart/form-data; boundary=B"}), "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n\r\nxx\r\n--B\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\nContent-Type: application/json\r\n\r\n{\"path\":\"/x\",\"mode\":644}\r\n--B--\r\n", 0, "", nil), "want metadata then file"},
		{"upload metadata part not sent as JSON", synth(t, "POST", execdBase+"/files/upload",
			hdr(map[string]string{"Content-Type": "multipart/form-data; boundary=B"}), "--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"/x\",\"mode\":644}\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\nContent-Type: application/octet-stream\r\n\r\nxx\r\n--B--\r\n", 0, "", nil), `part "metadata" sent as Content-Type ""`},
		{"upload metadata with a string mode", synth(t, "POST", execdBase+"/files/upload",
			hdr(map[string]string{"Content-Type": "multipart/form-data; boundary=B"}), "--B\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\nContent-Type: application/json\r\n\r\n{\"path\":\"/x\",\"mode\":\"644\"}\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n\r\nxx\r\n--B--\r\n", 0, "", nil), "metadata part"},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			p := contractWithEndpoint(t).check([]exchange{cs.ex})
			if !strings.Contains(strings.Join(p, "\n"), cs.want) {
				t.Errorf("not refused for %q; the check said %q", cs.want, p)
			}
		})
	}
}

// TestContractCreateRequests holds the create request the runner builds,
// for target shapes the recorded runs do not all reach, to the lifecycle
// document and its prose rules (and its networkPolicy to the egress
// sidecar's): no resources, a lifetime or none, a network policy, harness
// labels and task names that are not label values as given.
func TestContractCreateRequests(t *testing.T) {
	c := newContract(t, contractOrigin+"/v1")
	cfgs := map[string]targets.OpenSandbox{
		"weak": {URL: contractOrigin + "/v1"},
		"hardened": {URL: contractOrigin + "/v1", Timeout: 900, Entrypoint: []string{"sleep", "infinity"},
			Resources: &targets.OpenSandboxResources{CPU: "500m", Memory: "256Mi"},
			Env:       map[string]string{"A": "1"}, Metadata: map[string]string{"team": "sec", "example.com/owner": "x"},
			NetworkPolicy: &targets.OpenSandboxPolicy{DefaultAction: "deny",
				Egress: []targets.OpenSandboxRule{{Action: "allow", Target: "pypi.org"}, {Action: "deny", Target: "*.example.com"}}}},
		"memory-only": {URL: contractOrigin + "/v1", Resources: &targets.OpenSandboxResources{Memory: "1Gi"}},
		"deny-all":    {URL: contractOrigin + "/v1", NetworkPolicy: &targets.OpenSandboxPolicy{DefaultAction: "deny"}},
	}
	specs := []runners.SandboxSpec{
		{Name: "sandcheck-probe-1"},
		{Name: "sandcheck fs.escape-through-a-very-long-probe-name/with slashes and spaces, more than 63 characters",
			Labels: map[string]string{"sandcheck.task": "task: a name of well over sixty-three characters, as tasks have", "sandcheck.run": "-lead-and-trail-"},
			Env:    map[string]string{"SANDCHECK_MARK": "m"}},
	}
	for name, cfg := range cfgs {
		r, err := New(cfg, testImage, "k", nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, spec := range specs {
			raw, err := json.Marshal(r.request(spec))
			if err != nil {
				t.Fatal(err)
			}
			ex := synth(t, "POST", contractOrigin+"/v1/sandboxes", keyHdr, string(raw), 202, "application/json", created)
			ex.ReqHeader.Set("Content-Type", "application/json")
			if p := c.check([]exchange{ex}); len(p) > 0 {
				t.Errorf("%s, sandbox %q: the create request breaks upstream's contract:\n%s\nbody: %s", name, spec.Name, strings.Join(p, "\n"), raw)
			}
		}
	}
}
