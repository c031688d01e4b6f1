package canary

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// refClient drives a reference broker behind the tool broker's address.
type refClient struct {
	t   *testing.T
	url string
}

func (c refClient) object(method, tok, tenant, resource string) int {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+BrokerObjectsPath+tenant+"/"+resource, strings.NewReader("x"))
	if err != nil {
		c.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode == 200 && !strings.HasPrefix(string(body), BrokerObjectReply) {
		c.t.Errorf("served without the broker's reply: %q", body)
	}
	return resp.StatusCode
}

func (c refClient) form(path, tok string) map[string]any {
	c.t.Helper()
	resp, err := http.PostForm(c.url+path, url.Values{"token": {tok}})
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&out); err != nil {
		c.t.Fatalf("%s: %v", path, err)
	}
	return out
}

// TestReferenceBrokerHardenedCycle drives the hardened reference broker
// through a full mint -> use -> revoke -> refuse cycle over HTTP, behind the
// tool broker's address as the harness and canary serve serve it: the token
// opens its own resource and operation only, introspection shows its
// lifetime, and once revoked every use and introspection refuses it. The
// record names the token by its SHA-256 only.
func TestReferenceBrokerHardenedCycle(t *testing.T) {
	tb, err := NewTokenBroker(TokenBrokerOptions{Mode: BrokerHardened})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewBroker(nil, "scbadmin", false).WithReference(tb))
	defer srv.Close()
	c := refClient{t, srv.URL}
	tok, claims, err := tb.Mint(Grant{Run: "run1", Task: "task1", Tenant: "tenant-a", Resource: "tickets", Operation: OpRead, TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if claims.Lifetime() != 15*time.Second {
		t.Errorf("lifetime %s, want 15s", claims.Lifetime())
	}
	// The token is JWT-shaped and its payload carries exp.
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || !strings.Contains(string(payload), `"exp":`) {
		t.Errorf("payload %q (%v)", payload, err)
	}
	for _, tc := range []struct {
		method, tenant, resource string
		want                     int
	}{
		{http.MethodGet, "tenant-a", "tickets", 200},
		{http.MethodGet, "tenant-a", "invoices", 403},
		{http.MethodPut, "tenant-a", "tickets", 403},
		{http.MethodGet, "tenant-b", "tickets", 403},
	} {
		if got := c.object(tc.method, tok, tc.tenant, tc.resource); got != tc.want {
			t.Errorf("%s %s/%s: %d, want %d", tc.method, tc.tenant, tc.resource, got, tc.want)
		}
	}
	if got := c.object(http.MethodGet, "", "tenant-a", "tickets"); got != 401 {
		t.Errorf("without a token: %d", got)
	}
	// A token with a forged payload (a wider scope) fails its signature.
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"tickets"`, `"invoices"`, 1))) + "." + parts[2]
	if got := c.object(http.MethodGet, forged, "tenant-a", "invoices"); got != 401 {
		t.Errorf("forged token: %d", got)
	}
	in := c.form(BrokerIntrospectPath, tok)
	if in["active"] != true || in["exp"].(float64) != float64(claims.Expiry) {
		t.Errorf("introspection %v", in)
	}
	if out := c.form(BrokerRevokePath, tok); out["revoked"] != true {
		t.Errorf("revoke %v", out)
	}
	if got := c.object(http.MethodGet, tok, "tenant-a", "tickets"); got != 401 {
		t.Errorf("after revocation: %d, want 401", got)
	}
	if in := c.form(BrokerIntrospectPath, tok); in["active"] != false {
		t.Errorf("introspection after revocation %v", in)
	}
	sum := TokenSHA256(tok)
	uses := tb.Uses(sum)
	var actions []string
	for _, u := range uses {
		actions = append(actions, u.Action)
	}
	if got := strings.Join(actions, ","); got != "mint,use,use,use,use,introspect,revoke,use,introspect" {
		t.Errorf("record %s", got)
	}
	last := uses[len(uses)-2]
	if last.Accepted || last.Reason != "revoked" || last.Status != 401 {
		t.Errorf("last use %+v", last)
	}
	rec, _ := json.Marshal(tb.Uses(""))
	if strings.Contains(string(rec), tok) || strings.Contains(string(rec), parts[2]) {
		t.Errorf("the record holds the token")
	}
}

// TestReferenceBrokerExpiryAndTeardown: a hardened token is refused once
// its lifetime passes and once its task is torn down.
func TestReferenceBrokerExpiryAndTeardown(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tb, _ := NewTokenBroker(TokenBrokerOptions{Mode: BrokerHardened, Now: func() time.Time { return now }})
	g := Grant{Run: "r", Task: "t", Tenant: "a", Resource: "x", Operation: OpRead, TTL: 5 * time.Second}
	tok, _, _ := tb.Mint(g)
	if u := tb.Use(tok, "a", "x", OpRead, "box"); !u.Accepted {
		t.Fatalf("fresh token refused: %+v", u)
	}
	now = now.Add(5 * time.Second)
	if u := tb.Use(tok, "a", "x", OpRead, "box"); u.Accepted || u.Reason != "expired" {
		t.Errorf("expired token: %+v", u)
	}
	tok2, _, _ := tb.Mint(g)
	if !tb.EndTask(TokenSHA256(tok2)) {
		t.Errorf("teardown did not revoke")
	}
	if u := tb.Use(tok2, "a", "x", OpRead, "harness"); u.Accepted || u.Reason != "revoked" {
		t.Errorf("after teardown: %+v", u)
	}
	if _, _, err := tb.Mint(Grant{Tenant: "a", Resource: "x", Operation: OpRead}); err == nil {
		t.Errorf("a grant without a TTL was minted")
	}
}

// TestReferenceBrokerWeak: the weak broker hands every task the same
// static key, which never expires, opens anything and survives revocation
// and teardown.
func TestReferenceBrokerWeak(t *testing.T) {
	tb, _ := NewTokenBroker(TokenBrokerOptions{Mode: BrokerWeak})
	srv := httptest.NewServer(NewBroker(nil, "scbadmin", true).WithReference(tb))
	defer srv.Close()
	c := refClient{t, srv.URL}
	a, ca, _ := tb.Mint(Grant{Task: "t1", Tenant: "a", Resource: "x", Operation: OpRead, TTL: time.Second})
	b, _, _ := tb.Mint(Grant{Task: "t2", Tenant: "b", Resource: "y", Operation: OpRead, TTL: time.Second})
	if a != b || ca.Expiry != 0 {
		t.Errorf("weak tokens differ or expire: %v %d", a != b, ca.Expiry)
	}
	if in := c.form(BrokerIntrospectPath, a); in["active"] != true || in["exp"].(float64) != 0 {
		t.Errorf("introspection %v", in)
	}
	c.form(BrokerRevokePath, a)
	if tb.EndTask(TokenSHA256(a)) {
		t.Errorf("the weak broker revoked at teardown")
	}
	if got := c.object(http.MethodPut, a, "tenant-b", "anything"); got != 200 {
		t.Errorf("weak key after revocation, other tenant, write: %d", got)
	}
	if got := c.object(http.MethodGet, "scwnotthekey", "a", "x"); got != 401 {
		t.Errorf("a wrong key: %d", got)
	}
}

// TestReferenceBrokerMintEndpoint: minting over HTTP needs the admin key,
// and the legacy query path keeps its own token.
func TestReferenceBrokerMintEndpoint(t *testing.T) {
	tb, _ := NewTokenBroker(TokenBrokerOptions{Mode: BrokerHardened, AdminKey: "scbadmin"})
	srv := httptest.NewServer(NewBroker(nil, "scbadmin", false).WithReference(tb))
	defer srv.Close()
	mint := func(auth string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+BrokerMintPath,
			strings.NewReader(`{"run":"r","task":"t","tenant":"a","resource":"x","operation":"read","ttl":5000000000}`))
		req.Header.Set("Authorization", "Bearer "+auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := mint("wrong"); code != 401 {
		t.Errorf("mint with a wrong key: %d", code)
	}
	code, out := mint("scbadmin")
	tok, _ := out["token"].(string)
	if code != 200 || tok == "" || out["token_sha256"] != TokenSHA256(tok) {
		t.Fatalf("mint: %d %v", code, out)
	}
	if u := tb.Use(tok, "a", "x", OpRead, "test"); !u.Accepted {
		t.Errorf("minted token refused: %+v", u)
	}
}
