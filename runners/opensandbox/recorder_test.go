package opensandbox

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
)

// recordBound bounds each recorded body: an upload's file part and a long
// command stream are cut there (and marked so).
const recordBound = 1 << 20

// recordMax bounds the exchanges one recorder keeps.
const recordMax = 5000

// exchange is one request the runner sent and the answer it read.
type exchange struct {
	Method, URL   string
	ReqHeader     http.Header
	ReqBody       []byte
	ReqTruncated  bool
	Status        int
	RespHeader    http.Header
	RespBody      []byte
	RespTruncated bool
	// Err is the transport's error when no answer came.
	Err string
}

// recorder is an http.RoundTripper between the runner and the servers it
// calls, keeping every exchange (bodies bounded by recordBound).
type recorder struct {
	next http.RoundTripper

	mu   sync.Mutex
	exs  []*exchange
	over bool
}

// record puts a recorder in front of the runner's HTTP client, which the
// lifecycle and execd calls share.
func record(t *testing.T, r *Runner) *recorder {
	t.Helper()
	next := r.http.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	rec := &recorder{next: next}
	r.http.Transport = rec
	if r.api.http != r.http {
		t.Fatal("the lifecycle client does not share the runner's HTTP client; the recorder would miss its calls")
	}
	return rec
}

// RoundTrip records req and its answer.
func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{Method: req.Method, URL: req.URL.String(), ReqHeader: req.Header.Clone()}
	rec.mu.Lock()
	if len(rec.exs) < recordMax {
		rec.exs = append(rec.exs, ex)
	} else {
		rec.over = true
	}
	rec.mu.Unlock()
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context())
		req.Body = &tee{rc: req.Body, mu: &rec.mu, buf: &ex.ReqBody, cut: &ex.ReqTruncated}
	}
	resp, err := rec.next.RoundTrip(req)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err != nil {
		ex.Err = err.Error()
		return nil, err
	}
	ex.Status, ex.RespHeader = resp.StatusCode, resp.Header.Clone()
	resp.Body = &tee{rc: resp.Body, mu: &rec.mu, buf: &ex.RespBody, cut: &ex.RespTruncated}
	return resp, nil
}

// exchanges is what was recorded so far, copied.
func (rec *recorder) exchanges(t *testing.T) []exchange {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.over {
		t.Errorf("more than %d exchanges: the recorder kept the first only", recordMax)
	}
	out := make([]exchange, 0, len(rec.exs))
	for _, ex := range rec.exs {
		c := *ex
		c.ReqBody, c.RespBody = bytes.Clone(ex.ReqBody), bytes.Clone(ex.RespBody)
		out = append(out, c)
	}
	return out
}

// tee copies what is read through it into buf, up to recordBound.
type tee struct {
	rc  io.ReadCloser
	mu  *sync.Mutex
	buf *[]byte
	cut *bool
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	if n > 0 {
		t.mu.Lock()
		room := recordBound - len(*t.buf)
		if n > room {
			*t.cut = true
		}
		*t.buf = append(*t.buf, p[:min(n, max(room, 0))]...)
		t.mu.Unlock()
	}
	return n, err
}

func (t *tee) Close() error { return t.rc.Close() }
