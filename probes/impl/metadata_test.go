package impl

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// fakeIMDS is a canary metadata service on loopback that records the
// attribution headers of every request.
type fakeIMDS struct {
	mu    sync.Mutex
	seen  []string // "METHOD path UA token imdsv2-token"
	srv   *httptest.Server
	token string
}

func newFakeIMDS(t *testing.T) *fakeIMDS {
	f := &fakeIMDS{token: "v2-session-token"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, strings.Join([]string{r.Method, r.URL.Path, r.UserAgent(),
			r.Header.Get("X-Sandcheck-Token"), r.Header.Get("X-aws-ec2-metadata-token")}, " "))
		f.mu.Unlock()
		switch {
		case r.Method == http.MethodPut && r.URL.Path == imdsTokenPath:
			w.Write([]byte(f.token))
		case r.URL.Path == imdsCredsPath:
			w.Write([]byte("canary-role\n"))
		case r.URL.Path == imdsCredsPath+"canary-role":
			w.Write([]byte(`{"AccessKeyId":"ASIACANARYEXAMPLE123","SecretAccessKey":"s3cr3t","Token":"t0k"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIMDS) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func TestIMDSReachable(t *testing.T) {
	for _, tt := range []struct {
		id string
		f  Func
	}{{"metadata.aws-imdsv1", imdsV1}, {"metadata.aws-imdsv2", imdsV2}} {
		t.Run(tt.id, func(t *testing.T) {
			f := newFakeIMDS(t)
			r := tt.f(context.Background(), probes.Params{Token: "tok1", MetadataAddr: f.addr()})
			if r.Outcome != probes.Escaped || r.Evidence["role"] != "canary-role" || r.Evidence["access_key_id"] != "ASIACANARYEXAMPLE123" {
				t.Fatalf("got %s %v", r.Outcome, r.Evidence)
			}
			for _, v := range r.Evidence {
				if strings.Contains(v, "s3cr3t") || strings.Contains(v, "t0k") || strings.Contains(v, f.token) {
					t.Errorf("evidence carries a secret: %v", r.Evidence)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, s := range f.seen {
				if !strings.Contains(s, "sandcheck-probe/tok1/"+tt.id+" tok1") {
					t.Errorf("request without attribution headers: %s", s)
				}
				if tt.id == "metadata.aws-imdsv2" && strings.HasPrefix(s, "GET") && !strings.HasSuffix(s, f.token) {
					t.Errorf("IMDSv2 GET without the session token: %s", s)
				}
			}
		})
	}
}

func TestIMDSUnreachableIsBlocked(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	r := imdsV1(context.Background(), probes.Params{MetadataAddr: addr})
	if r.Outcome != probes.Blocked || r.Evidence["errno"] != "ECONNREFUSED(111)" {
		t.Fatalf("got %s %v", r.Outcome, r.Evidence)
	}
}

// A listener that accepts and never answers cannot tell a filtering proxy
// from a hop-limited IMDSv2 answer: inconclusive, with connected=true.
func TestIMDSConnectedNoAnswerIsInconclusive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	r := imdsV2(context.Background(), probes.Params{MetadataAddr: l.Addr().String()})
	if r.Outcome != probes.Inconclusive || r.Evidence["connected"] != "true" {
		t.Fatalf("got %s %v", r.Outcome, r.Evidence)
	}
	if d := time.Since(start); d > 2*imdsTimeout {
		t.Errorf("took %s, want about %s", d, imdsTimeout)
	}
}

func TestIMDSRedirectNotFollowed(t *testing.T) {
	hits := 0
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer target.Close()
	redir := httptest.NewServer(http.RedirectHandler(target.URL+"/x", http.StatusFound))
	defer redir.Close()
	r := imdsV1(context.Background(), probes.Params{MetadataAddr: strings.TrimPrefix(redir.URL, "http://")})
	if r.Outcome != probes.Escaped || r.Evidence["status"] != "302" || hits != 0 {
		t.Fatalf("got %s %v, redirect target hit %d times", r.Outcome, r.Evidence, hits)
	}
}

func TestMetadataAddr(t *testing.T) {
	for in, want := range map[string]string{
		"":                  DefaultMetadataAddr,
		"169.254.169.254":   "169.254.169.254:80",
		"127.0.0.1:8080":    "127.0.0.1:8080",
		"fd00:ec2::254":     "[fd00:ec2::254]:80",
		"[fd00:ec2::254]":   "[fd00:ec2::254]:80",
		"[fd00:ec2::254]:8": "[fd00:ec2::254]:8",
	} {
		if got := metadataAddr(in); got != want {
			t.Errorf("metadataAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
