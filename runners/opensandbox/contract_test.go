package opensandbox

// The contract the runner is held to, independent of the stand-in: upstream's
// own OpenAPI documents (testdata/openapi, copied unmodified from
// opensandbox-group/OpenSandbox at 3bb6fad3), checked with kin-openapi's
// request and response validators (JSON Schema 2020-12 for these 3.1
// documents), plus the rules upstream states only in prose or enforces only
// in its server code, each citing where. recorder_test.go records the
// exchanges this file judges.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// api is one upstream document with the base path its servers declare.
type api struct {
	name   string
	doc    *openapi3.T
	base   string // the declared server URL's path: "/v1" for the lifecycle, "" for execd and egress
	router routers.Router
}

// loadAPI reads one document from testdata/openapi, validates it as an
// OpenAPI document, and routes it on paths below its declared base.
func loadAPI(t *testing.T, file string) *api {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join("testdata", "openapi", file))
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validating %s as OpenAPI: %v", file, err)
	}
	if len(doc.Servers) == 0 {
		t.Fatalf("%s declares no server, so no base path", file)
	}
	// Every server a document declares shares one path (lifecycle:
	// http://localhost:8080/v1; execd: http://localhost:44772 and an https
	// one; egress: http://localhost:18080); the host is the deployment's.
	base := ""
	for i, s := range doc.Servers {
		u, err := url.Parse(s.URL)
		if err != nil {
			t.Fatalf("%s: server %q: %v", file, s.URL, err)
		}
		p := strings.TrimRight(u.Path, "/")
		if i > 0 && p != base {
			t.Fatalf("%s: servers declare different base paths %q and %q", file, base, p)
		}
		base = p
	}
	// Routing is on the path below the base (the recorder's exchanges have
	// had it checked and cut), so the router sees no servers.
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing %s: %v", file, err)
	}
	return &api{name: file, doc: doc, base: base, router: r}
}

var (
	specsOnce sync.Once
	specs     struct{ lifecycle, execd, egress *api }
)

// upstreamSpecs loads the three documents once per test binary.
func upstreamSpecs(t *testing.T) (lifecycle, execdAPI, egress *api) {
	t.Helper()
	specsOnce.Do(func() {
		specs.lifecycle = loadAPI(t, "sandbox-lifecycle.yml")
		specs.execd = loadAPI(t, "execd-api.yaml")
		specs.egress = loadAPI(t, "egress-api.yaml")
	})
	if specs.lifecycle == nil || specs.execd == nil || specs.egress == nil {
		t.Fatal("the upstream OpenAPI documents did not load (see the first test that tried)")
	}
	return specs.lifecycle, specs.execd, specs.egress
}

// schema is a named component schema of a document.
func (a *api) schema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	ref, ok := a.doc.Components.Schemas[name]
	if !ok || ref.Value == nil {
		t.Fatalf("%s has no schema %s", a.name, name)
	}
	return ref.Value
}

// contract judges one run's exchanges. The lifecycle server is at origin
// (scheme://host:port as the target names it); execd is wherever the
// lifecycle server's endpoint answers said, with the headers they named.
type contract struct {
	t                        *testing.T
	lifecycle, execd, egress *api
	origin                   string
	// endpoints maps an execd base URL, as an endpoint answer named it, to
	// the headers every request to it must carry.
	endpoints map[string]map[string]string
	// commandIDs are the ids execd's init events gave, the only ids the
	// runner may ask about or interrupt.
	commandIDs map[string]bool
	// seen counts the documented operations the exchanges reached, by
	// "document METHOD path".
	seen map[string]int
}

func newContract(t *testing.T, lifecycleURL string) *contract {
	t.Helper()
	l, e, g := upstreamSpecs(t)
	u, err := url.Parse(lifecycleURL)
	if err != nil {
		t.Fatalf("lifecycle URL %q: %v", lifecycleURL, err)
	}
	return &contract{t: t, lifecycle: l, execd: e, egress: g, origin: u.Scheme + "://" + u.Host,
		endpoints: map[string]map[string]string{}, commandIDs: map[string]bool{}, seen: map[string]int{}}
}

// check judges a run's exchanges in the order they were sent and returns
// one message per breach (nil: every one kept the contract).
func (c *contract) check(exs []exchange) []string {
	var out []string
	for i, ex := range exs {
		for _, p := range c.checkOne(ex) {
			out = append(out, fmt.Sprintf("#%d %s %s: %s", i, ex.Method, ex.URL, p))
		}
	}
	return out
}

func (c *contract) checkOne(ex exchange) []string {
	if ex.Err != "" {
		// No answer came (a timeout the test asked for, a cancelled
		// stream): the request is still judged.
		ex.Status = 0
	}
	u, err := url.Parse(ex.URL)
	if err != nil {
		return []string{fmt.Sprintf("unparseable URL: %v", err)}
	}
	if strings.HasPrefix(ex.URL, c.origin+"/") {
		return c.checkLifecycle(ex, u)
	}
	return c.checkExecd(ex, u)
}

// checkLifecycle judges a call to the lifecycle server.
func (c *contract) checkLifecycle(ex exchange, u *url.URL) []string {
	if u.Path == "/health" {
		// Not in sandbox-lifecycle.yml: upstream serves GET /health at its
		// root only, outside the /v1 base, without a key (server main.py
		// 189-197; middleware/auth.py 43).
		if ex.Method != http.MethodGet || u.RawQuery != "" || len(ex.ReqBody) > 0 {
			return []string{"the only call outside the documented API is a bare GET /health"}
		}
		if ex.Status != 0 && ex.Status != http.StatusOK {
			return []string{fmt.Sprintf("GET /health answered %d", ex.Status)}
		}
		c.seen["GET /health"]++
		return nil
	}
	rest, ok := strings.CutPrefix(u.Path, c.lifecycle.base+"/")
	if !ok {
		return []string{fmt.Sprintf("path %q is not under the lifecycle API's declared base %q", u.Path, c.lifecycle.base)}
	}
	probs := c.validate(c.lifecycle, ex, "/"+rest)
	if ex.Method == http.MethodPost && "/"+rest == "/sandboxes" {
		probs = append(probs, createRules(ex.ReqBody)...)
		probs = append(probs, c.egressShape(ex.ReqBody)...)
	}
	if ex.Method == http.MethodGet && "/"+rest == "/sandboxes" {
		probs = append(probs, listRules(u.Query())...)
	}
	if ex.Method == http.MethodGet && strings.Contains(rest, "/endpoints/") && ex.Status == http.StatusOK {
		probs = append(probs, c.learnEndpoint(ex.RespBody)...)
	}
	return probs
}

// checkExecd judges a call to a sandbox's execd.
func (c *contract) checkExecd(ex exchange, u *url.URL) []string {
	full := u.Scheme + "://" + u.Host + u.EscapedPath()
	var base string
	for b := range c.endpoints {
		if (full == b || strings.HasPrefix(full, b+"/")) && len(b) > len(base) {
			base = b
		}
	}
	if base == "" {
		return []string{"a call to an address no endpoint answer named"}
	}
	var probs []string
	// Endpoint.headers: "Requests targeting the sandbox must include the
	// corresponding header(s)" (sandbox-lifecycle.yml 1394).
	for k, v := range c.endpoints[base] {
		if got := ex.ReqHeader.Get(k); got != v {
			probs = append(probs, fmt.Sprintf("header %s the endpoint answer named is missing or altered", k))
		}
	}
	path := strings.TrimPrefix(full, base)
	if path == "" {
		path = "/"
	}
	p, err := url.PathUnescape(path)
	if err != nil {
		return append(probs, fmt.Sprintf("path %q: %v", path, err))
	}
	rest, ok := strings.CutPrefix(p, c.execd.base+"/")
	if !ok {
		return append(probs, fmt.Sprintf("path %q is not under execd's declared base %q", p, c.execd.base))
	}
	// execd's document requires its AccessToken on every call, but
	// upstream starts execd without one and names no header then
	// (../shared/opensandbox/README.md): a client can only send what the
	// endpoint answer gave, so the scheme is waived for an endpoint that
	// gave no token, and held for one that did.
	waive := ""
	if !hasHeader(c.endpoints[base], execdTokenHeader) {
		waive = execdTokenHeader
	}
	probs = append(probs, c.validateAs(c.execd, ex, "/"+rest, waive)...)
	switch {
	case ex.Method == http.MethodPost && rest == "command":
		probs = append(probs, commandRules(ex.ReqBody)...)
		probs = append(probs, c.checkStream(ex)...)
	case ex.Method == http.MethodDelete && rest == "command":
		// The id interrupted is one execd gave ("Session ID of the execution
		// context to interrupt", execd-api.yaml 462).
		if id := u.Query().Get("id"); !c.commandIDs[id] {
			probs = append(probs, fmt.Sprintf("interrupts id %q, which no init event gave", id))
		}
	case ex.Method == http.MethodGet && strings.HasPrefix(rest, "command/status/"):
		// "Command ID returned by RunCommand" (execd-api.yaml 487).
		if id := strings.TrimPrefix(rest, "command/status/"); !c.commandIDs[id] {
			probs = append(probs, fmt.Sprintf("asks the status of id %q, which no init event gave", id))
		}
	case ex.Method == http.MethodPost && rest == "files/upload":
		probs = append(probs, c.uploadRules(ex)...)
	}
	return probs
}

// validate runs kin-openapi's request validator, then its response
// validator, on one exchange routed at path (below the declared base).
func (c *contract) validate(a *api, ex exchange, path string) []string {
	return c.validateAs(a, ex, path, "")
}

// execdTokenHeader is execd's AccessToken scheme's header (execd-api.yaml
// 1115-1118).
const execdTokenHeader = "X-EXECD-ACCESS-TOKEN"

// hasHeader says headers names h (in any case).
func hasHeader(headers map[string]string, h string) bool {
	for k, v := range headers {
		if strings.EqualFold(k, h) && v != "" {
			return true
		}
	}
	return false
}

// validateAs is validate with the apiKey scheme carried in header waived
// ("" waives none).
func (c *contract) validateAs(a *api, ex exchange, path, waived string) []string {
	req, err := http.NewRequest(ex.Method, "http://contract.invalid"+path, bytes.NewReader(ex.ReqBody))
	if err != nil {
		return []string{fmt.Sprintf("rebuilding the request: %v", err)}
	}
	if u, err := url.Parse(ex.URL); err == nil {
		req.URL.RawQuery = u.RawQuery
	}
	req.Header = ex.ReqHeader.Clone()
	if req.Header.Get("Content-Type") == "" && len(ex.ReqBody) == 0 {
		req.Body = http.NoBody
	}
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		return []string{fmt.Sprintf("%s documents no %s %s: %v", a.name, ex.Method, path, err)}
	}
	c.seen[a.name+" "+route.Method+" "+route.Path]++
	opts := &openapi3filter.Options{
		MultiError:            true,
		IncludeResponseStatus: true,
		// A security scheme is met when its header is present; what the
		// key or token is worth is the server's business.
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			s := in.SecurityScheme
			if s.Type != "apiKey" || s.In != "header" {
				return fmt.Errorf("security scheme %s of type %s in %s is not one this check knows", in.SecuritySchemeName, s.Type, s.In)
			}
			if waived != "" && strings.EqualFold(s.Name, waived) {
				return nil
			}
			if in.RequestValidationInput.Request.Header.Get(s.Name) == "" {
				return fmt.Errorf("no %s header", s.Name)
			}
			return nil
		},
	}
	rin := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	var probs []string
	if ex.ReqTruncated || route.Path == "/files/upload" {
		// Only an upload's file part runs past the recorder's bound. And
		// no upload can pass kin-openapi's reading of this body: the
		// metadata part is `type: string` with `encoding.contentType:
		// application/json` (execd-api.yaml 816-817, 824-826), so a part sent as
		// the encoding says is decoded to an object and fails `string`,
		// and one sent otherwise fails the encoding. The official SDK
		// sends it as application/json (sdks/sandbox/go/execd.go 369-371),
		// as the runner does; uploadRules judges the parts instead.
		opts.ExcludeRequestBody = true
	}
	if err := openapi3filter.ValidateRequest(context.Background(), rin); err != nil {
		probs = append(probs, "request: "+flatten(err))
	}
	if ex.Status == 0 {
		return probs
	}
	respOpts := *opts
	respOpts.ExcludeRequestBody = false
	stream := isEventStream(route)
	if stream || ex.RespTruncated {
		// The event stream is judged frame by frame (checkStream).
		respOpts.ExcludeResponseBody = true
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: rin, Status: ex.Status,
		Header: ex.RespHeader, Options: &respOpts}
	out.SetBodyBytes(ex.RespBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		probs = append(probs, fmt.Sprintf("response %d: %s", ex.Status, flatten(err)))
	}
	return probs
}

// isEventStream says a route's 200 answer is documented as an event stream.
func isEventStream(route *routers.Route) bool {
	r := route.Operation.Responses.Status(http.StatusOK)
	return r != nil && r.Value != nil && r.Value.Content.Get("text/event-stream") != nil
}

// flatten words a validator's error (a MultiError of many) on one line.
func flatten(err error) string {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		parts := make([]string, 0, len(me))
		for _, e := range me {
			parts = append(parts, flatten(e))
		}
		return strings.Join(parts, "; ")
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	// The validator quotes the whole schema; the path, the reason and the
	// value are what a reader needs.
	if i := strings.Index(s, " Schema: "); i >= 0 {
		tail := ""
		if j := strings.LastIndex(s, " Value: "); j > i {
			tail = s[j:]
		}
		s = s[:i] + tail
	}
	return s
}

// learnEndpoint records an endpoint answer's base URL and headers: the
// address and headers the runner must then use for execd. A form without a
// scheme is upstream's host[:port][/path] (server networking.py 217-218,
// 269), reached with the lifecycle URL's scheme as the official SDK does
// (sdks/sandbox/go sandbox.go 418-421).
func (c *contract) learnEndpoint(body []byte) []string {
	var ep struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(body, &ep); err != nil {
		return []string{fmt.Sprintf("endpoint answer: %v", err)}
	}
	base := strings.TrimRight(ep.Endpoint, "/")
	if !strings.Contains(base, "://") {
		base = strings.SplitN(c.origin, "://", 2)[0] + "://" + base
	}
	c.endpoints[base] = ep.Headers
	return nil
}

// checkStream validates each frame of POST /command's answer against the
// ServerStreamEvent schema (execd-api.yaml 1290-1352). The framing is not
// checkable against the document: it names text/event-stream, and the
// shipped execd writes bare JSON objects separated by blank lines, no
// "data:" field (../shared/opensandbox/README.md); both are split here as
// the official SDK splits them (sdks/sandbox/go/streaming.go 45-137).
func (c *contract) checkStream(ex exchange) []string {
	if ex.Status != http.StatusOK {
		return nil
	}
	var probs []string
	if ct, _, _ := mime.ParseMediaType(ex.RespHeader.Get("Content-Type")); ct != "text/event-stream" {
		probs = append(probs, fmt.Sprintf("stream served as %q, not text/event-stream", ex.RespHeader.Get("Content-Type")))
	}
	schema := c.execd.schema(c.t, "ServerStreamEvent")
	frames := splitFrames(ex.RespBody, ex.RespTruncated)
	if len(frames) == 0 && !ex.RespTruncated && ex.Err == "" {
		probs = append(probs, "a 200 stream without one event")
	}
	for i, f := range frames {
		var v any
		if err := json.Unmarshal(f, &v); err != nil {
			probs = append(probs, fmt.Sprintf("event %d is not JSON: %v", i, err))
			continue
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
			probs = append(probs, fmt.Sprintf("event %d %s: %s", i, snippet(f), flatten(err)))
			continue
		}
		var ev struct{ Type, Text string }
		_ = json.Unmarshal(f, &ev)
		if ev.Type == "init" && ev.Text != "" {
			c.commandIDs[ev.Text] = true
		}
	}
	return probs
}

// splitFrames splits a recorded stream into events' data: blocks
// separated by blank lines, each a bare JSON line or "data:" lines. A
// recording cut at its bound drops its last, partial block.
func splitFrames(body []byte, truncated bool) [][]byte {
	blocks := regexp.MustCompile(`\r?\n\r?\n`).Split(string(body), -1)
	if truncated && len(blocks) > 0 {
		blocks = blocks[:len(blocks)-1]
	}
	var out [][]byte
	for _, b := range blocks {
		var data []string
		for _, line := range strings.Split(b, "\n") {
			line = strings.TrimRight(line, "\r")
			switch {
			case strings.HasPrefix(line, "{"):
				data = append(data, line)
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
		if len(data) > 0 {
			out = append(out, []byte(strings.Join(data, "\n")))
		}
	}
	return out
}

// uploadRules: "Each file upload consists of two parts: a metadata part
// (JSON) followed by the actual file part" (execd-api.yaml 804-805), the
// metadata "JSON-encoded file metadata (FileMetadata object)" (818).
func (c *contract) uploadRules(ex exchange) []string {
	mt, params, err := mime.ParseMediaType(ex.ReqHeader.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return []string{fmt.Sprintf("upload sent as %q, not multipart/form-data", ex.ReqHeader.Get("Content-Type"))}
	}
	mr := multipart.NewReader(bytes.NewReader(ex.ReqBody), params["boundary"])
	var names []string
	var probs []string
	for i := 0; i < 16; i++ {
		part, err := mr.NextPart()
		if err != nil {
			if !errors.Is(err, io.EOF) && !ex.ReqTruncated {
				probs = append(probs, fmt.Sprintf("multipart body: %v", err))
			}
			break
		}
		names = append(names, part.FormName())
		// Each part as the document's encoding names it (execd-api.yaml
		// 824-828).
		if want := c.uploadEncoding(part.FormName()); want == "" {
			probs = append(probs, fmt.Sprintf("part %q is not in the document", part.FormName()))
		} else if got, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); got != want {
			probs = append(probs, fmt.Sprintf("part %q sent as Content-Type %q, the document's encoding is %q", part.FormName(), part.Header.Get("Content-Type"), want))
		}
		if part.FormName() != "metadata" {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(part, 64<<10))
		if err != nil {
			probs = append(probs, fmt.Sprintf("metadata part: %v", err))
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			probs = append(probs, fmt.Sprintf("metadata part is not JSON: %v", err))
			continue
		}
		if err := c.execd.schema(c.t, "FileMetadata").VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
			probs = append(probs, "metadata part: "+flatten(err))
		}
		if m, ok := v.(map[string]any); !ok || m["path"] == nil {
			probs = append(probs, "metadata part names no path")
		}
	}
	if len(names) < 2 || names[0] != "metadata" || names[1] != "file" {
		probs = append(probs, fmt.Sprintf("parts %q, want metadata then file", names))
	}
	return probs
}

// uploadEncoding is the content type execd-api.yaml's upload body names
// for a part ("" for a part it does not name).
func (c *contract) uploadEncoding(name string) string {
	op := c.execd.doc.Paths.Find("/files/upload").Post
	mt := op.RequestBody.Value.Content.Get("multipart/form-data")
	if mt == nil || mt.Encoding[name] == nil {
		return ""
	}
	return mt.Encoding[name].ContentType
}

// egressShape: the create request's networkPolicy "Shape matches the
// sidecar /policy endpoint" (sandbox-lifecycle.yml 1272), so it is held to
// the egress document's NetworkPolicy too: that is what the sidecar is
// given.
func (c *contract) egressShape(body []byte) []string {
	var req map[string]any
	if json.Unmarshal(body, &req) != nil || req["networkPolicy"] == nil {
		return nil
	}
	if err := c.egress.schema(c.t, "NetworkPolicy").VisitJSON(req["networkPolicy"], openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		return []string{"networkPolicy against egress-api.yaml: " + flatten(err)}
	}
	return nil
}
