package kubernetes

import (
	"fmt"

	"k8s.io/client-go/discovery"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
)

// clients is the part of the Kubernetes API a run uses. It is a handful of
// typed clients rather than client-go's Clientset: the Clientset links a
// client, an apply configuration and generic instantiations for every API
// group the cluster could serve, which made it about a fifth of the
// stripped binary. client-go's fake Clientset satisfies it in tests.
type clients interface {
	CoreV1() corev1client.CoreV1Interface
	NodeV1() nodev1client.NodeV1Interface
	RbacV1() rbacv1client.RbacV1Interface
	AuthorizationV1() authzv1client.AuthorizationV1Interface
	Discovery() discovery.DiscoveryInterface
}

type groupClients struct {
	core  *corev1client.CoreV1Client
	node  *nodev1client.NodeV1Client
	rbac  *rbacv1client.RbacV1Client
	authz *authzv1client.AuthorizationV1Client
	disc  *discovery.DiscoveryClient
}

func (c *groupClients) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c *groupClients) NodeV1() nodev1client.NodeV1Interface { return c.node }
func (c *groupClients) RbacV1() rbacv1client.RbacV1Interface { return c.rbac }
func (c *groupClients) AuthorizationV1() authzv1client.AuthorizationV1Interface {
	return c.authz
}
func (c *groupClients) Discovery() discovery.DiscoveryInterface { return c.disc }

// newClients makes the typed clients over one shared HTTP client, as
// kubernetes.NewForConfig does.
func newClients(cfg *rest.Config) (clients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", cfg.Host, err)
	}
	c := &groupClients{}
	if c.core, err = corev1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("core/v1 client: %w", err)
	}
	if c.node, err = nodev1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("node/v1 client: %w", err)
	}
	if c.rbac, err = rbacv1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("rbac/v1 client: %w", err)
	}
	if c.authz, err = authzv1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("authorization/v1 client: %w", err)
	}
	if c.disc, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return c, nil
}
