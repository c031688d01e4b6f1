package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

func node(name, ip string, port int32, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	return n
}

func TestFillParams(t *testing.T) {
	nodes := []corev1.Node{
		*node("a", "10.77.0.1", 10250, map[string]string{"pool": "runc"}),
		*node("b", "10.77.0.2", 10250, map[string]string{"pool": "gvisor"}),
		*node("c", "fd00::1", 10250, map[string]string{"pool": "runc"}), // IPv6: no kubelet address
	}
	srv := nodeServer(t, nodes)
	cases := []struct {
		host     string
		pool     *targets.Pool
		api      string
		nodes    []string
		kubelets []string
	}{
		{"https://10.77.0.1:6443", &targets.Pool{Name: "runc", NodeSelector: map[string]string{"pool": "runc"}},
			"10.77.0.1:6443", []string{"a", "c"}, []string{"10.77.0.1:10250"}},
		{"https://10.77.0.1", nil, "10.77.0.1:443", []string{"a", "b", "c"}, []string{"10.77.0.1:10250", "10.77.0.2:10250"}},
		// A name is never resolved: the probes get no API server address.
		{"https://cluster.example:6443", nil, "", []string{"a", "b", "c"}, []string{"10.77.0.1:10250", "10.77.0.2:10250"}},
	}
	cs, err := newClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		r := &Runner{cfg: &rest.Config{Host: tc.host}, cs: cs, pool: tc.pool, log: slog.New(slog.DiscardHandler)}
		r.readPlatform(context.Background())
		var p probes.Params
		r.FillParams(&p)
		if p.KubeAPIServerAddr != tc.api || !slices.Equal(p.KubeNodeNames, tc.nodes) || !slices.Equal(p.KubeletAddrs, tc.kubelets) {
			t.Errorf("%s pool %v: api %q nodes %v kubelets %v; want %q %v %v", tc.host, tc.pool, p.KubeAPIServerAddr, p.KubeNodeNames, p.KubeletAddrs, tc.api, tc.nodes, tc.kubelets)
		}
	}
}

// TestFillParamsRefused: an API server that refuses the node list leaves
// the nodes out and keeps the API server's address.
func TestFillParamsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"nodes is forbidden"}`)
	}))
	t.Cleanup(srv.Close)
	cs, err := newClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.listNodes(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes: want a Forbidden error, got %v", err)
	}
	r := &Runner{cfg: &rest.Config{Host: "https://10.77.0.1:6443"}, cs: cs, log: slog.New(slog.DiscardHandler)}
	r.readPlatform(context.Background())
	var p probes.Params
	r.FillParams(&p)
	if p.KubeAPIServerAddr != "10.77.0.1:6443" || len(p.KubeNodeNames) != 0 || len(p.KubeletAddrs) != 0 {
		t.Errorf("api %q nodes %v kubelets %v; want 10.77.0.1:6443 and no nodes", p.KubeAPIServerAddr, p.KubeNodeNames, p.KubeletAddrs)
	}
}

// nodeServer is an API server on loopback that answers GET /api/v1/nodes
// (with its labelSelector) and nothing else.
func nodeServer(t *testing.T, nodes []corev1.Node) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || req.URL.Path != "/api/v1/nodes" {
			t.Errorf("unexpected request %s %s", req.Method, req.URL)
			http.NotFound(w, req)
			return
		}
		sel, err := labels.Parse(req.URL.Query().Get("labelSelector"))
		if err != nil {
			t.Errorf("labelSelector %q: %v", req.URL.Query().Get("labelSelector"), err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
		for _, n := range nodes {
			if sel.Matches(labels.Set(n.Labels)) {
				out.Items = append(out.Items, n)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(&out)
	}))
	t.Cleanup(srv.Close)
	return srv
}
