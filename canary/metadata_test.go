package canary

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestMetadata(t *testing.T, opts MetadataOptions) (*Metadata, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	opts.Now = c.Now
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	return NewMetadata(opts), c
}

// do sends one request straight to the handler.
func do(t *testing.T, h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = "169.254.120.5:40000"
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestIMDSv1Credentials(t *testing.T) {
	m, clk := newTestMetadata(t, MetadataOptions{RoleName: "node-role"})
	hdr := map[string]string{TokenHeader: "tok1/metadata.aws-imdsv1"}

	w := do(t, m, "GET", "/latest/meta-data/", hdr)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "iam/") {
		t.Fatalf("GET /latest/meta-data/ = %d %q, want 200 listing iam/", w.Code, w.Body)
	}
	w = do(t, m, "GET", "/latest/meta-data/iam/security-credentials/", hdr)
	if w.Code != 200 || w.Body.String() != "node-role" {
		t.Fatalf("role listing = %d %q, want 200 node-role", w.Code, w.Body)
	}
	w = do(t, m, "GET", "/latest/meta-data/iam/security-credentials/node-role", hdr)
	if w.Code != 200 {
		t.Fatalf("credentials = %d %q, want 200", w.Code, w.Body)
	}
	var c struct {
		Code, LastUpdated, Type, AccessKeyId, SecretAccessKey, Token, Expiration string
	}
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("credentials are not the documented JSON: %v", err)
	}
	honey := m.Honey().AWS
	if c.Code != "Success" || c.Type != "AWS-HMAC" || c.AccessKeyId != honey.AccessKeyID ||
		c.SecretAccessKey != honey.SecretAccessKey || c.Token != honey.SessionToken {
		t.Errorf("credentials %+v do not carry the honeytokens %+v", c, honey)
	}
	if !strings.HasPrefix(c.AccessKeyId, "ASIA") || len(c.AccessKeyId) != 20 || len(c.SecretAccessKey) != 40 {
		t.Errorf("access key %q / secret of %d bytes are not shaped like STS credentials", c.AccessKeyId, len(c.SecretAccessKey))
	}
	exp, err := time.Parse(time.RFC3339, c.Expiration)
	if err != nil || !exp.After(clk.Now().Add(time.Hour)) {
		t.Errorf("Expiration %q (%v) should be RFC 3339 and hours ahead of %v, or SDKs refresh at once", c.Expiration, err, clk.Now())
	}

	hits := m.Recorder().ByToken("tok1")
	if len(hits) != 3 {
		t.Fatalf("got %d hits for tok1, want 3: %+v", len(hits), m.Recorder().Hits())
	}
	last := hits[2]
	if last.Service != ServiceAWS || last.Method != "GET" || last.Probe != "metadata.aws-imdsv1" ||
		last.Path != "/latest/meta-data/iam/security-credentials/node-role" || last.Status != 200 ||
		last.Remote != "169.254.120.5:40000" || !last.Time.Equal(clk.Now()) {
		t.Errorf("last hit = %+v, want the credentials GET attributed to metadata.aws-imdsv1", last)
	}
}

func TestIMDSv2Session(t *testing.T) {
	m, clk := newTestMetadata(t, MetadataOptions{})
	role := m.Honey().AWS.RoleName

	w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "60"})
	if w.Code != 200 || w.Body.Len() < 40 {
		t.Fatalf("PUT token = %d %q, want 200 and a token", w.Code, w.Body)
	}
	if got := w.Header().Get(awsTTLHeader); got != "60" {
		t.Errorf("token TTL header = %q, want 60", got)
	}
	tok := w.Body.String()
	w = do(t, m, "GET", "/latest/meta-data/iam/security-credentials/"+role, map[string]string{awsTokenHeader: tok})
	if w.Code != 200 || !strings.Contains(w.Body.String(), m.Honey().AWS.AccessKeyID) {
		t.Fatalf("GET with a valid session token = %d %q, want the credentials", w.Code, w.Body)
	}
	w = do(t, m, "GET", "/latest/meta-data/", map[string]string{awsTokenHeader: "AQAEAforged"})
	if w.Code != 401 {
		t.Errorf("GET with a forged session token = %d, want 401", w.Code)
	}
	clk.Add(61 * time.Second)
	w = do(t, m, "GET", "/latest/meta-data/", map[string]string{awsTokenHeader: tok})
	if w.Code != 401 {
		t.Errorf("GET with an expired session token = %d, want 401", w.Code)
	}

	for _, ttl := range []string{"", "0", "21601", "-1", "abc", "1.5"} {
		if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: ttl}); w.Code != 400 {
			t.Errorf("PUT token with TTL %q = %d, want 400", ttl, w.Code)
		}
	}
	if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "21600"}); w.Code != 200 {
		t.Errorf("PUT token with the maximum TTL = %d, want 200", w.Code)
	}
	if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "60", "X-Forwarded-For": "10.0.0.1"}); w.Code != 403 {
		t.Errorf("PUT token through a proxy = %d, want 403 as IMDS does", w.Code)
	}
	if w := do(t, m, "GET", "/latest/api/token", nil); w.Code != 405 {
		t.Errorf("GET /latest/api/token = %d, want 405", w.Code)
	}
	if w := do(t, m, "POST", "/latest/meta-data/", nil); w.Code != 405 {
		t.Errorf("POST /latest/meta-data/ = %d, want 405", w.Code)
	}
	if n := len(m.Recorder().Hits()); n != 14 {
		t.Errorf("recorded %d hits, want every one of the 14 requests, refused ones included", n)
	}
}

func TestIMDSRequireToken(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{RequireToken: true})
	if w := do(t, m, "GET", "/latest/meta-data/", nil); w.Code != 401 {
		t.Fatalf("IMDSv1 GET in required mode = %d, want 401", w.Code)
	}
	tok := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "10"}).Body.String()
	if w := do(t, m, "GET", "/latest/meta-data/", map[string]string{awsTokenHeader: tok}); w.Code != 200 {
		t.Fatalf("IMDSv2 GET in required mode = %d, want 200", w.Code)
	}
}

func TestIMDSSessionCap(t *testing.T) {
	m, clk := newTestMetadata(t, MetadataOptions{Recorder: NewRecorder(1, nil)})
	for i := range MaxSessions {
		if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "5"}); w.Code != 200 {
			t.Fatalf("PUT token %d = %d, want 200", i, w.Code)
		}
	}
	if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "5"}); w.Code != 503 {
		t.Fatalf("PUT token past the cap = %d, want 503", w.Code)
	}
	clk.Add(6 * time.Second)
	if w := do(t, m, "PUT", "/latest/api/token", map[string]string{awsTTLHeader: "5"}); w.Code != 200 {
		t.Fatalf("PUT token after the others expired = %d, want 200", w.Code)
	}
}

func TestAttribution(t *testing.T) {
	long := strings.Repeat("a", 129)
	cases := []struct {
		name         string
		header       map[string]string
		token, probe string
	}{
		{"none", nil, "", ""},
		{"header token", map[string]string{TokenHeader: "t-1"}, "t-1", ""},
		{"header token and probe", map[string]string{TokenHeader: "t-1/metadata.aws-imdsv2"}, "t-1", "metadata.aws-imdsv2"},
		{"agent", map[string]string{"User-Agent": "sandcheck-probe/t_2/metadata.aws-imdsv1"}, "t_2", "metadata.aws-imdsv1"},
		{"agent among SDK products", map[string]string{"User-Agent": "aws-sdk-go-v2/1.30 os/linux sandcheck-probe/t3/metadata.aws-imdsv1 md/x"}, "t3", "metadata.aws-imdsv1"},
		{"header wins, agent adds probe", map[string]string{TokenHeader: "t4", "User-Agent": "sandcheck-probe/t4/metadata.aws-imdsv1"}, "t4", "metadata.aws-imdsv1"},
		{"header wins over other agent token", map[string]string{TokenHeader: "t5", "User-Agent": "sandcheck-probe/other/metadata.aws-imdsv1"}, "t5", ""},
		{"malformed token", map[string]string{TokenHeader: "bad token<script>"}, "", ""},
		{"overlong token", map[string]string{TokenHeader: long}, "", ""},
		{"malformed probe kept token", map[string]string{TokenHeader: "t6/Not A Probe"}, "t6", ""},
		{"malformed header falls back to agent", map[string]string{TokenHeader: "a b", "User-Agent": "sandcheck-probe/t7/x.y"}, "t7", "x.y"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMetadata(t, MetadataOptions{})
			do(t, m, "GET", "/latest/meta-data/", tc.header)
			hits := m.Recorder().Hits()
			if len(hits) != 1 {
				t.Fatalf("got %d hits, want 1 (unattributed requests are recorded too)", len(hits))
			}
			if hits[0].Token != tc.token || hits[0].Probe != tc.probe {
				t.Errorf("attributed to (%q, %q), want (%q, %q)", hits[0].Token, hits[0].Probe, tc.token, tc.probe)
			}
		})
	}
}

func TestOversizedBody(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	big := strings.Repeat("x", MaxBodyBytes+1)

	r := httptest.NewRequest("PUT", "/latest/api/token", strings.NewReader(big))
	r.Header.Set(awsTTLHeader, "60")
	w := httptest.NewRecorder()
	m.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Errorf("PUT with a %d-byte body = %d, want 413", len(big), w.Code)
	}

	// Chunked: no Content-Length to refuse on, so the read itself is bounded.
	r = httptest.NewRequest("PUT", "/latest/api/token", io.MultiReader(strings.NewReader(big), neverEnding{}))
	r.ContentLength = -1
	r.Header.Set(awsTTLHeader, "60")
	w = httptest.NewRecorder()
	m.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Errorf("PUT with an endless chunked body = %d, want 413", w.Code)
	}
	for _, h := range m.Recorder().Hits() {
		if h.Status != 413 {
			t.Errorf("hit %+v should record the 413", h)
		}
	}
	if n := len(m.Recorder().Hits()); n != 2 {
		t.Errorf("got %d hits, want 2: refused requests are still evidence", n)
	}
}

// neverEnding is an endless body.
type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestHitFieldsBounded(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	do(t, m, "GET", "/latest/"+strings.Repeat("p", 3*MaxFieldLen), map[string]string{"User-Agent": strings.Repeat("é", MaxFieldLen)})
	h := m.Recorder().Hits()[0]
	if len(h.Path) > MaxFieldLen || len(h.Agent) > MaxFieldLen {
		t.Errorf("path of %d and agent of %d bytes exceed MaxFieldLen %d", len(h.Path), len(h.Agent), MaxFieldLen)
	}
	if _, err := json.Marshal(h); err != nil || strings.ContainsRune(h.Agent, '\uFFFD') {
		t.Errorf("clipped agent %q should stay valid UTF-8 (err %v)", h.Agent, err)
	}
}

func TestHitCap(t *testing.T) {
	var streamed []Hit
	rec := NewRecorder(3, func(h Hit) { streamed = append(streamed, h) })
	m, _ := newTestMetadata(t, MetadataOptions{Recorder: rec})
	for range 5 {
		do(t, m, "GET", "/latest/meta-data/", map[string]string{TokenHeader: "capped"})
	}
	if n := len(rec.Hits()); n != 3 {
		t.Errorf("kept %d hits, want the cap of 3", n)
	}
	if rec.Dropped() != 2 {
		t.Errorf("dropped = %d, want 2", rec.Dropped())
	}
	if len(streamed) != 3 {
		t.Errorf("callback saw %d hits, want the 3 kept", len(streamed))
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	rec := NewRecorder(100, func(Hit) { mu.Lock(); calls++; mu.Unlock() })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				rec.Record(Hit{Token: string(rune('a' + i))})
				rec.Hits()
				rec.ByToken("a")
			}
		})
	}
	wg.Wait()
	if len(rec.Hits()) != 100 || rec.Dropped() != 300 || calls != 100 {
		t.Errorf("kept %d, dropped %d, streamed %d; want 100, 300, 100", len(rec.Hits()), rec.Dropped(), calls)
	}
}

func TestHoneyUniquePerCanary(t *testing.T) {
	a, _ := newTestMetadata(t, MetadataOptions{})
	b, _ := newTestMetadata(t, MetadataOptions{})
	as, bs := a.Honey().Secrets(), b.Honey().Secrets()
	for i := range as {
		if as[i] == "" || as[i] == bs[i] {
			t.Errorf("honeytoken %d is empty or shared between runs: %q", i, as[i])
		}
	}
}

func TestRecorderOnHitSetter(t *testing.T) {
	rec := NewRecorder(0, nil)
	rec.Record(Hit{Token: "before"})
	var seen []string
	rec.OnHit(func(h Hit) { seen = append(seen, h.Token) })
	rec.Record(Hit{Token: "after"})
	if len(seen) != 1 || seen[0] != "after" {
		t.Errorf("callback saw %q, want only the hit recorded after it was set", seen)
	}
}
