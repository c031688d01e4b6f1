package impl

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// The kubelet mounts a pod's token as a link into a timestamped folder:
// reading inside the box follows it, and reads are bounded.
func TestReadSandboxFileFollowsTheBoxsLinks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "token"), []byte("eyJhbGciOi.payload.sig"), 0o600)
	os.Symlink(filepath.Base(data), filepath.Join(dir, "..data"))
	os.Symlink("..data/token", filepath.Join(dir, "token"))
	b, err := readSandboxFile(filepath.Join(dir, "token"))
	if err != nil || string(b) != "eyJhbGciOi.payload.sig" {
		t.Fatalf("read %q, %v", b, err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("x", k8sReadMax+100)), 0o600)
	if b, err := readSandboxFile(big); err != nil || len(b) != k8sReadMax {
		t.Errorf("read %d bytes, %v; want %d", len(b), err, k8sReadMax)
	}
	if _, err := readSandboxFile(dir); err == nil {
		t.Error("a folder was read as a file")
	}
}

func TestKubernetesProbesWithoutAddresses(t *testing.T) {
	p := probes.Params{Token: "tok"}
	for id, f := range map[string]Func{"sa-token-api": k8sTokenAPI, "rbac-list-secrets": k8sListSecrets,
		"rbac-create-pods": k8sCreatePods, "quota-escape": k8sQuotaEscape, "kubelet-port": k8sKubeletPort,
		"downward-node-name": k8sDownwardNodeName} {
		if r := f(context.Background(), p); r.Outcome != probes.Inconclusive {
			t.Errorf("%s with no address or node named: %s (%s), want inconclusive", id, r.Outcome, r.Detail)
		}
	}
}

func TestDownwardNodeNameInEnvironment(t *testing.T) {
	p := probes.Params{Token: "tok", KubeNodeNames: []string{"sandcheck-node-zz9"}}
	if r := k8sDownwardNodeName(context.Background(), p); r.Outcome != probes.Blocked {
		t.Fatalf("without the name: %s (%s)", r.Outcome, r.Detail)
	}
	t.Setenv("MY_NODE", "sandcheck-node-zz9")
	r := k8sDownwardNodeName(context.Background(), p)
	if r.Outcome != probes.Escaped || !strings.Contains(r.Detail, "env MY_NODE") {
		t.Fatalf("with the name in MY_NODE: %s (%s)", r.Outcome, r.Detail)
	}
}

func TestKubeletPortRefused(t *testing.T) {
	// A loopback port nothing listens on: refused, so blocked.
	p := probes.Params{Token: "tok", KubeletAddrs: []string{"127.0.0.1:1"}}
	if r := k8sKubeletPort(context.Background(), p); r.Outcome != probes.Blocked {
		t.Fatalf("%s (%s)", r.Outcome, r.Detail)
	}
}

func TestKubeletPortAnswers(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods" || r.Header.Get("Authorization") != "" {
			t.Errorf("kubelet asked %s with Authorization %q", r.URL.Path, r.Header.Get("Authorization"))
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	r := k8sKubeletPort(context.Background(), probes.Params{Token: "tok", KubeletAddrs: []string{addr}})
	if r.Outcome != probes.Escaped || r.Evidence["pods_"+addr] != "HTTP 401" {
		t.Fatalf("%s (%s) %v", r.Outcome, r.Detail, r.Evidence)
	}
}

// An API server that takes the connection and never answers is not a
// network keeping the pod out: inconclusive, never blocked; one that
// refuses the connection is.
func TestAPIServerSilenceIsNotAFence(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // held open, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, tc := range []struct {
		addr string
		want probes.Outcome
	}{
		{ln.Addr().String(), probes.Inconclusive},
		{"127.0.0.1:1", probes.Blocked},
	} {
		p := probes.Params{KubeAPIServerAddr: tc.addr}
		_, _, err := newAPIClient(p, "test").do(context.Background(), http.MethodGet, "/version", "tok", nil)
		if err == nil {
			t.Fatalf("API server at %s answered", tc.addr)
		}
		if r := unreachable(p, err, ev{}); r.Outcome != tc.want {
			t.Errorf("API server at %s: %s (%s), want %s", tc.addr, r.Outcome, r.Detail, tc.want)
		}
	}
}
