package canary

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// BrokerMode is how the reference token broker treats its tokens.
type BrokerMode string

// The reference broker's modes.
const (
	// BrokerWeak hands every sandbox one long-lived static key that opens
	// any resource for any operation and tenant, and ignores revocation: a
	// careless platform's broker, the negative control.
	BrokerWeak BrokerMode = "weak"
	// BrokerHardened mints a signed token per task, scoped to one tenant,
	// resource and operation, living no longer than the task's budget and
	// revoked when the task's sandbox is torn down: the positive control.
	BrokerHardened BrokerMode = "hardened"
)

// BrokerModes are the reference broker's modes, in order.
var BrokerModes = []BrokerMode{BrokerWeak, BrokerHardened}

// The reference broker's paths, on the tool broker's address.
const (
	// BrokerObjectsPath is the prefix of the brokered objects:
	// /v1/objects/<tenant>/<resource>; GET reads, PUT writes.
	BrokerObjectsPath = "/v1/objects/"
	// BrokerIntrospectPath answers POST token=<token> with the token's
	// claims (RFC 7662 in spirit): {"active":..,"exp":..,...}.
	BrokerIntrospectPath = "/v1/token/introspect"
	// BrokerRevokePath revokes the token of POST token=<token>.
	BrokerRevokePath = "/v1/token/revoke"
	// BrokerMintPath mints a token for a JSON Grant, for callers holding
	// the admin key only (canary serve's operator; never a sandbox).
	BrokerMintPath = "/v1/token/mint"
)

// BrokerObjectReply starts the answer to an authorised object call.
const BrokerObjectReply = "SANDCHECK-BROKER object"

// Operations a grant names.
const (
	OpRead  = "read"
	OpWrite = "write"
)

// Grant is what the platform authorises one task to do through the broker.
// Every value is made by the harness for a test; none names anything real.
type Grant struct {
	// Run, Sandbox and Task identify the workload the token is bound to.
	Run     string `json:"run"`
	Sandbox string `json:"sandbox,omitempty"`
	Task    string `json:"task"`
	// Tenant, Resource and Operation are the one thing the token opens.
	Tenant    string `json:"tenant"`
	Resource  string `json:"resource"`
	Operation string `json:"operation"`
	// TTL is the token's lifetime; the hardened broker refuses a grant
	// without one.
	TTL time.Duration `json:"ttl"`
}

// TokenClaims are what a token stands for, as the broker records them.
// Exp and Iat are Unix seconds; Exp 0 means the token never expires.
type TokenClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub,omitempty"`
	Run       string `json:"run,omitempty"`
	Task      string `json:"task,omitempty"`
	Tenant    string `json:"tenant"`
	Resource  string `json:"res"`
	Operation string `json:"op"`
	IssuedAt  int64  `json:"iat"`
	Expiry    int64  `json:"exp"`
	ID        string `json:"jti"`
}

// Lifetime is how long the token lives from its issue; 0 for never.
func (c TokenClaims) Lifetime() time.Duration {
	if c.Expiry == 0 {
		return 0
	}
	return time.Duration(c.Expiry-c.IssuedAt) * time.Second
}

// brokerIssuer names the reference broker in its tokens.
const brokerIssuer = "sandcheck-reference-broker"

// wildcard in a claim opens anything (the weak key's claims).
const wildcard = "*"

// BrokerUse is one entry of the broker's record: a mint, use,
// introspection, revocation or teardown, by the token's SHA-256. The token
// itself is never kept or logged.
type BrokerUse struct {
	Time time.Time `json:"time"`
	// Action is mint, use, introspect, revoke or teardown.
	Action string `json:"action"`
	// TokenSHA256 is the hex SHA-256 of the token presented (or minted).
	TokenSHA256 string `json:"token_sha256,omitempty"`
	// Tenant, Resource and Operation are what a use asked for.
	Tenant    string `json:"tenant,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Accepted says whether the broker honoured the call; Status is its
	// HTTP status and Reason why it refused.
	Accepted bool   `json:"accepted"`
	Status   int    `json:"status"`
	Reason   string `json:"reason,omitempty"`
	// Remote is the caller as the host saw it ("harness" for the
	// harness's own calls).
	Remote string `json:"remote,omitempty"`
	// Claims are the token's claims where the broker knows them.
	Claims *TokenClaims `json:"claims,omitempty"`
}

// MaxBrokerUses bounds the broker's record; later entries are counted,
// not kept.
const MaxBrokerUses = 4096

// TokenBrokerOptions configure a reference token broker.
type TokenBrokerOptions struct {
	// Mode is weak or hardened.
	Mode BrokerMode
	// AdminKey, when set, opens BrokerMintPath to callers presenting it
	// as a bearer token; empty leaves minting to Mint.
	AdminKey string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// TokenBroker is the reference tool broker's token side: it mints tokens
// for grants, checks them on every object call, answers introspection,
// revokes on request and records every call by the token's SHA-256. It is
// safe for concurrent use.
type TokenBroker struct {
	mode   BrokerMode
	admin  string
	now    func() time.Time
	key    []byte // the hardened broker's signing key, never handed out
	static string // the weak broker's one key

	mu      sync.Mutex
	claims  map[string]TokenClaims // by token SHA-256
	revoked map[string]bool        // by token SHA-256
	uses    []BrokerUse
	dropped int
}

// NewTokenBroker returns a reference token broker in the given mode.
func NewTokenBroker(o TokenBrokerOptions) (*TokenBroker, error) {
	if o.Mode != BrokerWeak && o.Mode != BrokerHardened {
		return nil, fmt.Errorf("reference broker: mode %q is not weak or hardened", o.Mode)
	}
	b := &TokenBroker{mode: o.Mode, admin: o.AdminKey, now: o.Now, key: make([]byte, 32),
		claims: map[string]TokenClaims{}, revoked: map[string]bool{}}
	if b.now == nil {
		b.now = time.Now
	}
	rand.Read(b.key) // never fails (crypto/rand)
	s := make([]byte, 16)
	rand.Read(s)
	b.static = "scw" + hex.EncodeToString(s)
	if b.mode == BrokerWeak {
		b.claims[TokenSHA256(b.static)] = TokenClaims{Issuer: brokerIssuer, Tenant: wildcard, Resource: wildcard,
			Operation: wildcard, IssuedAt: b.now().Unix(), ID: "static"}
	}
	return b, nil
}

// Mode is the broker's mode.
func (b *TokenBroker) Mode() BrokerMode { return b.mode }

// TokenSHA256 is the hex SHA-256 of a token, the only form in which a
// token is recorded or reported.
func TokenSHA256(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// Mint makes the token for one grant: the weak broker's static key for
// every grant, or a signed token scoped to the grant, expiring after its
// TTL. The mint is recorded with the token's claims.
func (b *TokenBroker) Mint(g Grant) (string, TokenClaims, error) {
	if b.mode == BrokerWeak {
		b.mu.Lock()
		c := b.claims[TokenSHA256(b.static)]
		b.mu.Unlock()
		b.record(BrokerUse{Action: "mint", TokenSHA256: TokenSHA256(b.static), Accepted: true, Status: 200, Remote: "harness", Claims: &c})
		return b.static, c, nil
	}
	if g.TTL < time.Second || g.Tenant == "" || g.Resource == "" || (g.Operation != OpRead && g.Operation != OpWrite) {
		return "", TokenClaims{}, fmt.Errorf("reference broker: a grant needs a tenant, a resource, read or write and a TTL of at least 1s (got %+v)", g)
	}
	id := make([]byte, 8)
	rand.Read(id)
	now := b.now()
	c := TokenClaims{Issuer: brokerIssuer, Subject: g.Sandbox, Run: g.Run, Task: g.Task, Tenant: g.Tenant,
		Resource: g.Resource, Operation: g.Operation, IssuedAt: now.Unix(),
		Expiry: now.Add(g.TTL).Unix(), ID: hex.EncodeToString(id)}
	tok, err := b.sign(c)
	if err != nil {
		return "", TokenClaims{}, err
	}
	sum := TokenSHA256(tok)
	b.mu.Lock()
	b.claims[sum] = c
	b.mu.Unlock()
	b.record(BrokerUse{Action: "mint", TokenSHA256: sum, Accepted: true, Status: 200, Remote: "harness", Claims: &c})
	return tok, c, nil
}

// jwtHeader is the JOSE header of every hardened token.
var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// sign makes a JWT-shaped token (HS256) of the claims.
func (b *TokenBroker) sign(c TokenClaims) (string, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("reference broker: encoding claims: %w", err)
	}
	msg := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(body)
	m := hmac.New(sha256.New, b.key)
	m.Write([]byte(msg))
	return msg + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// maxTokenLen bounds a presented token.
const maxTokenLen = 2048

// lookup returns the claims of a token this broker issued and whether it
// is valid now ("" reason) or why not.
func (b *TokenBroker) lookup(tok string) (TokenClaims, string) {
	if tok == "" {
		return TokenClaims{}, "no token"
	}
	if len(tok) > maxTokenLen {
		return TokenClaims{}, "token too long"
	}
	sum := TokenSHA256(tok)
	if b.mode == BrokerHardened {
		parts := strings.Split(tok, ".")
		if len(parts) != 3 || parts[0] != jwtHeader {
			return TokenClaims{}, "not a token of this broker"
		}
		m := hmac.New(sha256.New, b.key)
		m.Write([]byte(parts[0] + "." + parts[1]))
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil || !hmac.Equal(sig, m.Sum(nil)) {
			return TokenClaims{}, "bad signature"
		}
	}
	b.mu.Lock()
	c, known := b.claims[sum]
	revoked := b.revoked[sum]
	b.mu.Unlock()
	switch {
	case !known:
		return TokenClaims{}, "unknown token"
	case revoked:
		return c, "revoked"
	case c.Expiry != 0 && b.now().Unix() >= c.Expiry:
		return c, "expired"
	}
	return c, ""
}

// Use decides one object call: status 200 when the token is valid and its
// claims cover the tenant, resource and operation; 401 for a token that is
// missing, unknown, expired or revoked; 403 for one outside its scope. The
// call is recorded with the caller's remote.
func (b *TokenBroker) Use(tok, tenant, resource, op, remote string) BrokerUse {
	u := BrokerUse{Action: "use", Tenant: clip(tenant), Resource: clip(resource), Operation: clip(op), Remote: clip(remote)}
	if tok != "" {
		u.TokenSHA256 = TokenSHA256(tok)
	}
	c, why := b.lookup(tok)
	switch {
	case why != "":
		u.Status, u.Reason = 401, why
	case !covers(c.Tenant, tenant) || !covers(c.Resource, resource) || !covers(c.Operation, op):
		u.Status, u.Reason = 403, fmt.Sprintf("out of scope: the token grants %s %s/%s", c.Operation, c.Tenant, c.Resource)
	default:
		u.Status, u.Accepted = 200, true
	}
	if c.Issuer != "" {
		u.Claims = &c
	}
	b.record(u)
	return u
}

func covers(claim, want string) bool { return claim == wildcard || claim == want }

// Introspect answers for a token: its claims and whether it is active.
// The call is recorded.
func (b *TokenBroker) Introspect(tok, remote string) (TokenClaims, bool) {
	c, why := b.lookup(tok)
	u := BrokerUse{Action: "introspect", Accepted: why == "", Status: 200, Reason: why, Remote: clip(remote)}
	if tok != "" {
		u.TokenSHA256 = TokenSHA256(tok)
	}
	if c.Issuer != "" {
		u.Claims = &c
	}
	b.record(u)
	return c, why == ""
}

// Revoke revokes the token of that SHA-256 (the platform's revoke call,
// ${TOKEN_SHA256}): the hardened broker refuses it from then on; the weak
// broker answers as if it had and keeps honouring it. It reports whether
// the token is now refused.
func (b *TokenBroker) Revoke(sum, remote string) bool {
	return b.revoke("revoke", sum, remote)
}

// EndTask is the platform's teardown of a task's sandbox: the hardened
// broker revokes the task's token, the weak one does nothing.
func (b *TokenBroker) EndTask(sum string) bool {
	return b.revoke("teardown", sum, "harness")
}

func (b *TokenBroker) revoke(action, sum, remote string) bool {
	b.mu.Lock()
	_, known := b.claims[sum]
	done := known && b.mode == BrokerHardened
	if done {
		b.revoked[sum] = true
	}
	b.mu.Unlock()
	u := BrokerUse{Action: action, TokenSHA256: sum, Accepted: done, Status: 200, Remote: clip(remote)}
	switch {
	case !known:
		u.Status, u.Reason = 404, "unknown token"
	case !done:
		u.Reason = "the broker ignores revocation"
	}
	b.record(u)
	return done
}

// Uses returns the record's entries for a token SHA-256 (all entries for
// ""), oldest first.
func (b *TokenBroker) Uses(sum string) []BrokerUse {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []BrokerUse
	for _, u := range b.uses {
		if sum == "" || u.TokenSHA256 == sum {
			out = append(out, u)
		}
	}
	return out
}

// Dropped counts the entries the bounded record could not keep.
func (b *TokenBroker) Dropped() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

func (b *TokenBroker) record(u BrokerUse) {
	u.Time = b.now().UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.uses) >= MaxBrokerUses {
		b.dropped++
		return
	}
	b.uses = append(b.uses, u)
}
