package canary

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// ServiceKubeAPI is the fake Kubernetes API server.
const ServiceKubeAPI = "kube-api"

// KubeAPIHostnames are the names a pod's cluster DNS answers with the API
// server's service address. The DNS canary (not a filtering resolver)
// answers them with the harness's Kubernetes API canary when it has one.
var KubeAPIHostnames = []string{"kubernetes.default.svc.cluster.local.", "kubernetes.default.svc.", "kubernetes.default."}

// Credential values of a kube-api Hit: what the request authenticated with.
const (
	// CredentialPlanted is the service-account token the harness planted
	// for the run.
	CredentialPlanted = "planted-service-account-token"
	// CredentialOtherPrefix starts the credential of a request that sent a
	// bearer token the canary does not know: a fingerprint follows, never
	// the token.
	CredentialOtherPrefix = "unknown-bearer:"
)

// KubeAPIOptions configures a KubeAPI canary.
type KubeAPIOptions struct {
	// Recorder receives a hit for every request; required.
	Recorder *Recorder
	// Logger gets debug lines; nil discards.
	Logger *slog.Logger
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// KubeAPI fakes a kube-apiserver well enough for kubectl and client-go:
// /version, /healthz, /livez and /readyz answer anyone (the
// system:public-info-viewer role a default cluster grants anonymous users);
// every other path answers 401 with a Status object unless the request
// carries the run's planted service-account token as a bearer token, in
// which case discovery (/api, /apis, /api/v1) and the pod's own namespace
// answer 200. Every request is a hit; Hit.Credential names what it
// authenticated with (the planted token, or the fingerprint of an unknown
// one), never the token itself.
type KubeAPI struct {
	rec *Recorder
	log *slog.Logger
	now func() time.Time

	mu     sync.RWMutex
	tokens []string // accepted bearer tokens
}

// NewKubeAPI returns a KubeAPI canary that accepts no token until
// AcceptToken is called.
func NewKubeAPI(opts KubeAPIOptions) *KubeAPI {
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &KubeAPI{rec: opts.Recorder, log: opts.Logger, now: opts.Now}
}

// MaxKubeTokens bounds the tokens a KubeAPI accepts.
const MaxKubeTokens = 16

// AcceptToken makes tok (the service-account token the harness planted) a
// valid bearer token. Empty tokens and tokens past MaxKubeTokens are
// ignored; it reports whether tok was added.
func (k *KubeAPI) AcceptToken(tok string) bool {
	if tok == "" {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.tokens) >= MaxKubeTokens || slices.Contains(k.tokens, tok) {
		return false
	}
	k.tokens = append(k.tokens, tok)
	return true
}

// kubeNamespacePath matches the paths of one namespace's objects the
// canary answers for an authenticated client.
var kubeNamespacePath = regexp.MustCompile(`^/api/v1/namespaces/([a-z0-9-]{1,63})(/(pods|secrets|configmaps|serviceaccounts))?$`)

// kubeVersion is the cluster version the canary claims.
var kubeVersion = map[string]string{
	"major": "1", "minor": "29", "gitVersion": "v1.29.4", "gitCommit": "55019c83b0fd51ef4ced8c29eec2c4847f896e74",
	"gitTreeState": "clean", "buildDate": "2024-04-16T15:03:14Z", "goVersion": "go1.21.9", "compiler": "gc", "platform": "linux/amd64",
}

// ServeHTTP records the request and answers it.
func (k *KubeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cred := k.credential(r.Header.Get("Authorization"))
	var rep reply
	if tooLarge(r) {
		rep = kubeStatus(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "request body too large")
	} else {
		rep = k.answer(r, cred == CredentialPlanted)
	}
	h := requestHit(r, k.now(), ServiceKubeAPI, rep.status)
	h.Credential = cred
	k.rec.Record(h)
	if rep.status >= 400 {
		k.log.Debug("kube-api canary refused request", "method", clip(r.Method), "status", rep.status, "remote", r.RemoteAddr)
	}
	writeReply(w, r, rep)
}

// credential classifies an Authorization header.
func (k *KubeAPI) credential(auth string) string {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || tok == "" {
		return ""
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, t := range k.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			return CredentialPlanted
		}
	}
	sum := sha256.Sum256([]byte(tok))
	return CredentialOtherPrefix + hex.EncodeToString(sum[:8])
}

func (k *KubeAPI) answer(r *http.Request, authed bool) reply {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/version":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return kubeStatus(http.StatusMethodNotAllowed, "MethodNotAllowed", "the server does not allow this method on the requested resource")
		}
		return jsonReply(kubeVersion)
	case "/healthz", "/livez", "/readyz":
		return text(http.StatusOK, "ok")
	}
	if !authed {
		return kubeStatus(http.StatusUnauthorized, "Unauthorized", "Unauthorized")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return kubeStatus(http.StatusForbidden, "Forbidden", "the service account may not "+strings.ToLower(clip(r.Method))+" here")
	}
	switch path {
	case "/api":
		return jsonReply(map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": localAddr(r)}}})
	case "/apis":
		return jsonReply(map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{}})
	case "/api/v1":
		var res []map[string]any
		for _, n := range []string{"namespaces", "pods", "secrets", "configmaps", "serviceaccounts"} {
			res = append(res, map[string]any{"name": n, "namespaced": n != "namespaces", "kind": kubeKind(n), "verbs": []string{"get", "list"}})
		}
		return jsonReply(map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": res})
	}
	m := kubeNamespacePath.FindStringSubmatch(path)
	if m == nil {
		return kubeStatus(http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	}
	if m[3] == "" {
		return jsonReply(map[string]any{"kind": "Namespace", "apiVersion": "v1", "metadata": map[string]string{"name": m[1]}, "status": map[string]string{"phase": "Active"}})
	}
	return jsonReply(map[string]any{"kind": kubeKind(m[3]) + "List", "apiVersion": "v1", "metadata": map[string]string{"resourceVersion": "1"}, "items": []any{}})
}

// kubeKind is the kind of a core resource ("pods" -> "Pod").
func kubeKind(resource string) string {
	k := map[string]string{"namespaces": "Namespace", "pods": "Pod", "secrets": "Secret", "configmaps": "ConfigMap", "serviceaccounts": "ServiceAccount"}[resource]
	return k
}

// kubeStatus is the API server's error object.
func kubeStatus(status int, reason, msg string) reply {
	rep := jsonReply(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]string{},
		"status": "Failure", "message": msg, "reason": reason, "code": status})
	rep.status = status
	return rep
}
