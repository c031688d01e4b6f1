package canary

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MetadataOptions configures a Metadata canary.
type MetadataOptions struct {
	// Recorder receives every hit; required.
	Recorder *Recorder
	// Logger gets debug lines about refused requests; nil discards.
	Logger *slog.Logger
	// RoleName is the IAM role the AWS canary claims ("sandcheck-node-role"
	// if empty).
	RoleName string
	// RequireToken makes the AWS canary behave like IMDSv2 "required" mode:
	// a GET without a session token is refused with 401. By default it
	// answers IMDSv1 too, as an instance with the weak default does.
	RequireToken bool
	// Now returns the time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Metadata fakes the cloud instance metadata services well enough for real
// SDKs: AWS IMDSv1 and IMDSv2 at /latest/, GCP at /computeMetadata/v1/ and
// Azure IMDS at /metadata/. It hands out per-run honeytokens and records
// every request, answered or refused, as a Hit.
type Metadata struct {
	rec          *Recorder
	log          *slog.Logger
	now          func() time.Time
	requireToken bool
	honey        Honey

	mu     sync.Mutex
	tokens map[string]time.Time // IMDSv2 session token -> expiry
}

// MaxSessions bounds the IMDSv2 session tokens held at once; past it, PUT
// /latest/api/token answers 503 until old tokens expire.
const MaxSessions = 1024

// NewMetadata returns a Metadata canary with fresh honeytokens.
func NewMetadata(opts MetadataOptions) *Metadata {
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RoleName == "" {
		opts.RoleName = "sandcheck-node-role"
	}
	return &Metadata{
		rec:          opts.Recorder,
		log:          opts.Logger,
		now:          opts.Now,
		requireToken: opts.RequireToken,
		honey:        newHoney(opts.RoleName),
		tokens:       make(map[string]time.Time),
	}
}

// Recorder returns the recorder the canary writes hits to.
func (m *Metadata) Recorder() *Recorder { return m.rec }

// Honey returns the honeytokens this canary hands out.
func (m *Metadata) Honey() Honey { return m.honey }

// reply is an answer decided before anything is written, so the hit is on
// record before the client can see the response.
type reply struct {
	status int
	ctype  string
	header map[string]string
	body   string
}

func text(status int, body string) reply {
	return reply{status: status, ctype: "text/plain", body: body}
}

// ServeHTTP dispatches by path (and, for GCP, by the Metadata-Flavor header
// its client libraries send to probe "/"), records the hit and answers.
func (m *Metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service, handle := ServiceAWS, m.aws
	switch {
	case strings.HasPrefix(r.URL.Path, "/computeMetadata/") || r.Header.Get("Metadata-Flavor") != "":
		service, handle = ServiceGCP, m.gcp
	case strings.HasPrefix(r.URL.Path, "/metadata/"):
		service, handle = ServiceAzure, m.azure
	}
	m.serve(w, r, service, handle)
}

// serve records the hit of one request to service and answers it with
// handle (or 413 for an oversized body).
func (m *Metadata) serve(w http.ResponseWriter, r *http.Request, service string, handle func(*http.Request) reply) {
	var rep reply
	if tooLarge(r) {
		rep = text(http.StatusRequestEntityTooLarge, "request body too large\n")
	} else {
		rep = handle(r)
	}
	m.rec.Record(requestHit(r, m.now(), service, rep.status))
	if rep.status >= 400 {
		m.log.Debug("canary refused request", "service", service, "method", clip(r.Method), "status", rep.status, "remote", r.RemoteAddr)
	}
	writeReply(w, r, rep)
}

// requestHit is the hit of one HTTP request answered with status.
func requestHit(r *http.Request, now time.Time, service string, status int) Hit {
	token, probe := attribute(r)
	return Hit{
		Time:    now.UTC(),
		Service: service,
		Method:  clip(r.Method),
		Path:    clip(r.URL.RequestURI()),
		Remote:  r.RemoteAddr,
		Local:   localAddr(r),
		Token:   token,
		Probe:   probe,
		Via:     attributedVia(r),
		Agent:   clip(r.UserAgent()),
		Status:  status,
	}
}

// writeReply writes a decided answer.
func writeReply(w http.ResponseWriter, r *http.Request, rep reply) {
	h := w.Header()
	for k, v := range rep.header {
		h.Set(k, v)
	}
	h.Set("Content-Type", rep.ctype)
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	if r.Method != http.MethodHead {
		io.WriteString(w, rep.body)
	}
}

// tooLarge reads at most MaxBodyBytes+1 of the body and reports whether it
// went past MaxBodyBytes. No metadata request has a body worth keeping.
func tooLarge(r *http.Request) bool {
	if r.ContentLength > MaxBodyBytes {
		return true
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, MaxBodyBytes+1))
	return n > MaxBodyBytes
}

// forwarded reports whether the request came through a proxy; the real
// services refuse those to blunt SSRF, and so do we.
func forwarded(r *http.Request) bool {
	return r.Header.Get("X-Forwarded-For") != ""
}

// localAddr is the address the request arrived on, as the server saw it.
func localAddr(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return ""
}
