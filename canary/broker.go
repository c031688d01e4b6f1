package canary

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// ServiceBroker is the harness's stand-in for a tool broker: the one
// endpoint a brokered sandbox may call, with the per-run token the
// platform hands the task. Status is 200 (served) or 401 (no valid token).
const ServiceBroker = "tool-broker"

// BrokerPath is where the broker answers.
const BrokerPath = "/v1/query"

// BrokerReply starts the broker's answer to an authorised request.
const BrokerReply = "SANDCHECK-BROKER ok"

// Broker serves BrokerPath to requests carrying "Authorization: Bearer
// <token>". Every request is recorded; a refused one without the probe's
// attribution, so that it never counts as the probe getting through.
type Broker struct {
	rec   *Recorder
	token string
	open  bool
	now   func() time.Time
	// ref is the reference token broker serving the token paths beside
	// BrokerPath (nil: none; see WithReference).
	ref atomic.Pointer[TokenBroker]
}

// NewBroker returns a Broker requiring token. With open set it serves
// requests without a valid token too: a careless platform's broker.
func NewBroker(rec *Recorder, token string, open bool) *Broker {
	if rec == nil {
		rec = NewRecorder(0, nil)
	}
	return &Broker{rec: rec, token: token, open: open, now: time.Now}
}

// WithReference has the broker serve the reference token broker's paths
// (objects, introspection, revocation) beside BrokerPath, on the same
// address; it may be called while the broker serves. It returns b.
func (b *Broker) WithReference(tb *TokenBroker) *Broker {
	b.ref.Store(tb)
	return b
}

// ServeHTTP answers one request.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tb := b.ref.Load(); tb != nil && tb.handles(r.URL.Path) {
		tb.ServeHTTP(w, r)
		return
	}
	hit := Hit{Time: b.now().UTC(), Service: ServiceBroker, Method: clip(r.Method), Path: clip(r.URL.RequestURI()),
		Remote: r.RemoteAddr, Agent: clip(r.UserAgent()), Transport: "tcp"}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		hit.Local = la.String()
	}
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	authorised := b.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(b.token)) == 1
	if r.URL.Path != BrokerPath {
		hit.Status = http.StatusNotFound
		b.rec.Record(hit)
		http.NotFound(w, r)
		return
	}
	if !authorised && !b.open {
		hit.Status = http.StatusUnauthorized
		b.rec.Record(hit)
		http.Error(w, "a valid broker token is required", http.StatusUnauthorized)
		return
	}
	hit.Token, hit.Probe = attribute(r)
	hit.Status = http.StatusOK
	b.rec.Record(hit)
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte(BrokerReply + "\n"))
}
