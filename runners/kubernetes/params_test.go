package kubernetes

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
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
	cs := fake.NewClientset(
		node("a", "10.77.0.1", 10250, map[string]string{"pool": "runc"}),
		node("b", "10.77.0.2", 10250, map[string]string{"pool": "gvisor"}),
		node("c", "fd00::1", 10250, map[string]string{"pool": "runc"}), // IPv6: no kubelet address
	)
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
	for _, tc := range cases {
		r := &Runner{cfg: &rest.Config{Host: tc.host}, cs: fakeClients{cs}, pool: tc.pool, log: slog.New(slog.DiscardHandler)}
		r.readPlatform(context.Background())
		var p probes.Params
		r.FillParams(&p)
		if p.KubeAPIServerAddr != tc.api || !slices.Equal(p.KubeNodeNames, tc.nodes) || !slices.Equal(p.KubeletAddrs, tc.kubelets) {
			t.Errorf("%s pool %v: api %q nodes %v kubelets %v; want %q %v %v", tc.host, tc.pool, p.KubeAPIServerAddr, p.KubeNodeNames, p.KubeletAddrs, tc.api, tc.nodes, tc.kubelets)
		}
	}
}

// fakeClients is client-go's fake Clientset as the runner's clients.
type fakeClients struct{ *fake.Clientset }

func (f fakeClients) Discovery() discovery.DiscoveryInterface { return f.Clientset.Discovery() }
