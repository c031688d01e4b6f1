package canary

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// maxBrokerBody bounds what the reference broker reads of a request body.
const maxBrokerBody = 4 << 10

// handles reports whether path is one of the reference broker's.
func (b *TokenBroker) handles(path string) bool {
	return strings.HasPrefix(path, BrokerObjectsPath) || strings.HasPrefix(path, "/v1/token/")
}

// ServeHTTP serves the reference broker's paths: objects (bearer token),
// introspection, revocation and, with an admin key, minting.
func (b *TokenBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBrokerBody)
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, BrokerObjectsPath):
		b.serveObject(w, r)
	case p == BrokerIntrospectPath && r.Method == http.MethodPost:
		c, active := b.Introspect(formToken(r), r.RemoteAddr)
		out := map[string]any{"active": active}
		if active {
			out["exp"], out["iat"], out["tenant"], out["res"], out["op"] = c.Expiry, c.IssuedAt, c.Tenant, c.Resource, c.Operation
			out["run"], out["task"], out["sub"], out["iss"] = c.Run, c.Task, c.Subject, c.Issuer
		}
		writeJSON(w, http.StatusOK, out)
	case p == BrokerRevokePath && r.Method == http.MethodPost:
		tok := formToken(r)
		if tok == "" {
			http.Error(w, "token= is required", http.StatusBadRequest)
			return
		}
		// RFC 7009: the answer is 200 whether or not the token was known.
		b.Revoke(TokenSHA256(tok), r.RemoteAddr)
		writeJSON(w, http.StatusOK, map[string]any{"revoked": true})
	case p == BrokerMintPath && r.Method == http.MethodPost && b.admin != "":
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(b.admin)) != 1 {
			http.Error(w, "the admin key is required", http.StatusUnauthorized)
			return
		}
		var g Grant
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			http.Error(w, "a JSON grant is required", http.StatusBadRequest)
			return
		}
		tok, c, err := b.Mint(g)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"token": tok, "token_sha256": TokenSHA256(tok), "claims": c})
	default:
		http.NotFound(w, r)
	}
}

// serveObject answers GET (read) and PUT (write) of
// /v1/objects/<tenant>/<resource>.
func (b *TokenBroker) serveObject(w http.ResponseWriter, r *http.Request) {
	tenant, resource, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, BrokerObjectsPath), "/")
	op := map[string]string{http.MethodGet: OpRead, http.MethodPut: OpWrite}[r.Method]
	if !ok || tenant == "" || resource == "" || strings.Contains(resource, "/") || op == "" {
		http.NotFound(w, r)
		return
	}
	io.Copy(io.Discard, r.Body)
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	u := b.Use(tok, tenant, resource, op, r.RemoteAddr)
	if !u.Accepted {
		http.Error(w, u.Reason, u.Status)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte(BrokerObjectReply + " " + op + " " + tenant + "/" + resource + "\n"))
}

// formToken is the token= field of a form body (bounded by the caller).
func formToken(r *http.Request) string {
	if err := r.ParseForm(); err != nil {
		return ""
	}
	return r.PostForm.Get("token")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
