package kubernetes

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sandcheck/sandcheck/probes"
)

// maxNodes bounds how many nodes' names and kubelets the probes are told.
const maxNodes = 8

// platform is what the runner tells the probes about the cluster: the
// addresses the cluster itself names, never guessed ones.
type platform struct {
	apiServer string   // IPv4:port of the API server (the kubeconfig's)
	kubelets  []string // IPv4:port of each node's kubelet
	nodes     []string // node names
}

// FillParams implements runners.ParamsFiller: the API server's address from
// the kubeconfig (when it is a literal IPv4 address) and the names and
// kubelet addresses of the nodes the pool may schedule on.
func (r *Runner) FillParams(p *probes.Params) {
	p.KubeAPIServerAddr = r.plat.apiServer
	p.KubeletAddrs = slices.Clone(r.plat.kubelets)
	p.KubeNodeNames = slices.Clone(r.plat.nodes)
}

// readPlatform fills r.plat. The API server's address comes from the
// kubeconfig; nodes that the pool's node selector picks come from the
// cluster (a kubeconfig that may not list nodes leaves them out).
func (r *Runner) readPlatform(ctx context.Context) {
	if u, err := url.Parse(r.cfg.Host); err == nil {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "443"
		}
		if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
			r.plat.apiServer = net.JoinHostPort(host, port)
		}
	}
	opts := metav1.ListOptions{}
	if r.pool != nil && len(r.pool.NodeSelector) > 0 {
		opts.LabelSelector = labels.SelectorFromSet(r.pool.NodeSelector).String()
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	nodes, err := r.cs.listNodes(cctx, opts)
	if err != nil {
		r.log.Debug("listing nodes for the probes' parameters", "err", err)
		return
	}
	for _, n := range nodes.Items {
		if len(r.plat.nodes) == maxNodes {
			break
		}
		r.plat.nodes = append(r.plat.nodes, n.Name)
		port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() && port > 0 {
				r.plat.kubelets = append(r.plat.kubelets, net.JoinHostPort(a.Address, strconv.Itoa(int(port))))
				break
			}
		}
	}
}
