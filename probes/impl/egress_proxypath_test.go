package impl

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// Every egress and metadata probe of the catalog has a proxy plan (a
// destination or the reason it has none), and nothing else has one.
func TestProxyPlansCoverCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range probes.Catalog() {
		if s.Category != "egress" && s.Category != "metadata" {
			continue
		}
		seen[s.ID] = true
		pl, ok := proxyPlans[s.ID]
		if !ok {
			t.Errorf("%s has no proxy plan", s.ID)
			continue
		}
		if (pl.dests == nil) == (pl.none == "") {
			t.Errorf("%s: a plan has destinations or a reason, exactly one", s.ID)
		}
	}
	for id := range proxyPlans {
		if !seen[id] {
			t.Errorf("proxy plan for %s, no egress or metadata probe of the catalog", id)
		}
	}
}

// clearRouteEnv leaves only the given proxy variables set.
func clearRouteEnv(t *testing.T, kv map[string]string) {
	t.Helper()
	for _, rv := range routeVars {
		t.Setenv(rv.name, kv[rv.name])
	}
}

// mirrorSink is a loopback HTTP server standing for the package mirror;
// it records the attribution of every request.
func mirrorSink(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Sandcheck-Token"))
		mu.Unlock()
		w.Write([]byte("index\n"))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func TestWithProxyPaths(t *testing.T) {
	const id = "egress.package-mirror"
	direct := func() probes.Result {
		return probes.Result{Outcome: probes.Blocked, Detail: "no direct connection", Evidence: map[string]string{"addr": "x"}}
	}
	t.Run("socks5-reaches", func(t *testing.T) {
		srv, got := mirrorSink(t)
		s := newSocksServer(t, "srt.u", "tok", 0)
		clearRouteEnv(t, map[string]string{"FTP_PROXY": "socks5h://srt.u:tok@localhost:" + portOf(s.ln.Addr())})
		p := probes.Params{Token: "sctok", WrapperProxy: true, MirrorAddr: srv.Listener.Addr().String(),
			WrapperProxies: []string{"socks5://" + s.addr()}}
		r := withProxyPaths(t.Context(), id, p, direct())
		if r.Outcome != probes.Inconclusive || !strings.Contains(r.Detail, "canary") {
			t.Errorf("%s: %s; want inconclusive until the canary confirms the escape", r.Outcome, r.Detail)
		}
		if want := "via-socks5 " + s.addr() + " (FTP_PROXY): reached"; !strings.Contains(r.Evidence["paths"], want) || !strings.HasPrefix(r.Evidence["paths"], "direct: blocked") {
			t.Errorf("paths %q, want direct: blocked and %q", r.Evidence["paths"], want)
		}
		if g := got(); len(g) != 1 || g[0] != "GET "+mirrorPath+" sctok/"+id+"/via-socks5" {
			t.Errorf("the destination got %q, want one GET attributed to the SOCKS5 path", g)
		}
	})
	t.Run("socks5-refused", func(t *testing.T) {
		srv, got := mirrorSink(t)
		s := newSocksServer(t, "", "", 2)
		clearRouteEnv(t, map[string]string{"ALL_PROXY": "socks5://127.0.0.1:" + portOf(s.ln.Addr())})
		p := probes.Params{Token: "sctok", WrapperProxy: true, MirrorAddr: srv.Listener.Addr().String(),
			WrapperProxies: []string{"socks5://" + s.addr()}}
		r := withProxyPaths(t.Context(), id, p, direct())
		if r.Outcome != probes.Blocked || !strings.Contains(r.Evidence["paths"], "via-socks5 "+s.addr()+" (ALL_PROXY): refused") {
			t.Errorf("%s: %s %v; want blocked, the SOCKS5 path refused", r.Outcome, r.Detail, r.Evidence)
		}
		if len(s.requests()) != 1 || len(got()) != 0 {
			t.Errorf("the proxy was asked %v and the destination got %v, want one refused CONNECT", s.requests(), got())
		}
	})
	t.Run("http-refused", func(t *testing.T) {
		srv, _ := mirrorSink(t)
		fp := newFakeProxy(t, false, false)
		addr := fp.ln.Addr().String()
		clearRouteEnv(t, map[string]string{"HTTP_PROXY": "http://localhost:" + portOf(fp.ln.Addr()), "HTTPS_PROXY": "http://localhost:" + portOf(fp.ln.Addr())})
		p := probes.Params{Token: "sctok", WrapperProxy: true, MirrorAddr: srv.Listener.Addr().String(),
			WrapperProxies: []string{"http://" + addr}}
		r := withProxyPaths(t.Context(), id, p, direct())
		want := "direct: blocked; via-get " + addr + " (HTTP_PROXY): refused; via-connect " + addr + " (HTTP_PROXY,HTTPS_PROXY): refused"
		if r.Outcome != probes.Blocked || r.Evidence["paths"] != want {
			t.Errorf("%s: paths %q, want blocked, %q", r.Outcome, r.Evidence["paths"], want)
		}
		if q := fp.requests(); len(q) != 2 || !strings.Contains(q[0]+q[1], "token=sctok/"+id+"/via-get") || !strings.Contains(q[0]+q[1], "token=sctok/"+id+"/via-connect") {
			t.Errorf("the proxy got %q, want a GET and a CONNECT, each attributed to its path", q)
		}
	})
	t.Run("http-reaches", func(t *testing.T) {
		srv, _ := mirrorSink(t)
		fp := newFakeProxy(t, true, false)
		clearRouteEnv(t, map[string]string{"HTTP_PROXY": "http://localhost:" + portOf(fp.ln.Addr())})
		p := probes.Params{Token: "sctok", WrapperProxy: true, MirrorAddr: srv.Listener.Addr().String(),
			WrapperProxies: []string{"http://" + fp.ln.Addr().String()}}
		r := withProxyPaths(t.Context(), id, p, direct())
		if r.Outcome != probes.Inconclusive || !strings.Contains(r.Evidence["paths"], "(HTTP_PROXY): reached") {
			t.Errorf("%s: %v; want inconclusive, reached through the HTTP proxy", r.Outcome, r.Evidence)
		}
	})
	// The box names a proxy the target does not declare (or declares for
	// the other protocol): it is never dialled.
	t.Run("undeclared", func(t *testing.T) {
		srv, _ := mirrorSink(t)
		s := newSocksServer(t, "", "", 0)
		clearRouteEnv(t, map[string]string{"FTP_PROXY": "socks5://127.0.0.1:" + portOf(s.ln.Addr())})
		p := probes.Params{Token: "sctok", WrapperProxy: true, MirrorAddr: srv.Listener.Addr().String(),
			WrapperProxies: []string{"http://" + s.addr(), "socks5://127.0.0.1:1"}}
		r := withProxyPaths(t.Context(), id, p, direct())
		if r.Outcome != probes.Inconclusive || !strings.Contains(r.Evidence["proxy_skipped"], "no proxy the target declares") {
			t.Errorf("%s: %s %v; want inconclusive, the proxy skipped", r.Outcome, r.Detail, r.Evidence)
		}
		if len(s.requests()) != 0 {
			t.Errorf("an undeclared proxy was asked %v", s.requests())
		}
	})
	t.Run("no-proxy-path", func(t *testing.T) {
		clearRouteEnv(t, nil)
		p := probes.Params{WrapperProxy: true, OutsideAddr: "127.0.0.1"}
		r := withProxyPaths(t.Context(), "egress.udp", p, direct())
		if r.Outcome != probes.Blocked || !strings.Contains(r.Evidence["paths"], "no proxy path: a UDP probe") {
			t.Errorf("%s: %v", r.Outcome, r.Evidence)
		}
		// Without a proxy-filtering wrapper nothing is added.
		r = withProxyPaths(t.Context(), id, probes.Params{}, direct())
		if _, ok := r.Evidence["paths"]; ok || r.Outcome != probes.Blocked {
			t.Errorf("without a wrapper proxy: %v", r)
		}
	})
}
