package canary

import (
	"sync"
	"time"
)

// Service names used in Hit.Service.
const (
	ServiceAWS   = "aws-imds"
	ServiceGCP   = "gcp-metadata"
	ServiceAzure = "azure-imds"
	// ServiceDNS is the DNS canary: Method is the query type, Path the
	// queried name, Status the DNS response code.
	ServiceDNS = "dns"
	// ServiceDNSFilter is a filtering resolver the harness runs for a
	// restricted egress profile (see DNSOptions.Allow): what it refused
	// went nowhere.
	ServiceDNSFilter = "dns-filter"
	// ServiceTCP and ServiceUDP are the plain sinks on harness-owned
	// "outside" addresses; ServiceHTTP is a sink connection that spoke HTTP.
	ServiceTCP  = "tcp-sink"
	ServiceUDP  = "udp-sink"
	ServiceHTTP = "http-sink"
)

// Hit is one request a canary received. Every field except Time, Service and
// Status is copied from the request, so it is attacker-controlled text: it is
// bounded (see MaxFieldLen) and must be treated as data, never as markup or
// commands.
type Hit struct {
	Time    time.Time `json:"time"`
	Service string    `json:"service"`
	Method  string    `json:"method"`
	// Path is the request URI (path and query).
	Path string `json:"path"`
	// Remote is the peer's host:port as the host saw it, not as the
	// request claims (X-Forwarded-For is ignored).
	Remote string `json:"remote"`
	// Local is the harness address:port the hit arrived on, so a run can
	// show that every destination it saw is one the harness owns.
	Local string `json:"local,omitempty"`
	// Transport is "tcp" or "udp" where a canary serves both.
	Transport string `json:"transport,omitempty"`
	// Token and Probe attribute the hit to one probe invocation; empty when
	// the request carried no well-formed attribution.
	Token string `json:"token,omitempty"`
	Probe string `json:"probe,omitempty"`
	// Via is the path the probe says it sent this by, from the third
	// segment of its attribution: "via-socks5", "via-connect", "via-get"
	// through a wrapper's proxy (probes/impl/egress_proxypath.go); empty for the
	// direct path. It tells which path the canary saw, never whether it
	// was an escape: that is the hit itself.
	Via string `json:"via,omitempty"`
	// Agent is the User-Agent, which names the client library (an SDK
	// versus a hand-written request).
	Agent string `json:"agent,omitempty"`
	// Status is the HTTP status the canary answered with; 200 on a
	// credentials path means honeytokens left the host.
	Status int `json:"status"`
	// Credential names what the request authenticated with, where a canary
	// checks credentials (the Kubernetes API canary: CredentialPlanted, or
	// CredentialOtherPrefix and a fingerprint); never a secret itself.
	Credential string `json:"credential,omitempty"`
}

// DefaultMaxHits is the number of hits a Recorder keeps when given no cap.
const DefaultMaxHits = 10000

// Recorder keeps the hits of one run. It is safe for concurrent use. Past its
// cap it drops hits and counts them, so a sandbox hammering a canary cannot
// exhaust the host's memory.
type Recorder struct {
	max int

	mu      sync.Mutex
	hits    []Hit
	dropped int

	cbMu  sync.Mutex // serializes onHit calls and guards onHit
	onHit func(Hit)
}

// NewRecorder returns a Recorder keeping at most max hits (DefaultMaxHits if
// max <= 0). onHit, if not nil, is called once for every kept hit, so the run
// can stream hits into its evidence log; calls are serialized, happen on the
// canary's request path (keep them quick) and are not made for dropped hits.
func NewRecorder(max int, onHit func(Hit)) *Recorder {
	if max <= 0 {
		max = DefaultMaxHits
	}
	return &Recorder{max: max, onHit: onHit}
}

// Record stores h, or counts it as dropped when the recorder is full. It
// reports whether h was kept.
func (r *Recorder) Record(h Hit) bool {
	r.mu.Lock()
	if len(r.hits) >= r.max {
		r.dropped++
		r.mu.Unlock()
		return false
	}
	r.hits = append(r.hits, h)
	r.mu.Unlock()
	r.cbMu.Lock()
	defer r.cbMu.Unlock()
	if r.onHit != nil {
		r.onHit(h)
	}
	return true
}

// OnHit sets the callback NewRecorder describes, replacing any set before.
// Hits kept earlier are not replayed; read them with Hits.
func (r *Recorder) OnHit(fn func(Hit)) {
	r.cbMu.Lock()
	defer r.cbMu.Unlock()
	r.onHit = fn
}

// Hits returns a copy of the kept hits in arrival order.
func (r *Recorder) Hits() []Hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Hit(nil), r.hits...)
}

// ByToken returns the kept hits attributed to token, in arrival order. An
// empty token selects the unattributed hits.
func (r *Recorder) ByToken(token string) []Hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Hit
	for _, h := range r.hits {
		if h.Token == token {
			out = append(out, h)
		}
	}
	return out
}

// Dropped returns how many hits arrived after the recorder was full.
func (r *Recorder) Dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
