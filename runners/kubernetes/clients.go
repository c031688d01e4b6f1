package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// The runner's own scheme holds only the four API groups it speaks:
// client-go's kubernetes/scheme (which its typed clients and discovery
// import) registers all of k8s.io/api, about a sixth of the stripped
// binary. The scheme decodes the platform's manifests, encodes request
// parameters and bodies and decodes answers (metav1.Status among them, so
// apierrors.IsNotFound and the like see the API server's reason).
var (
	scheme     = runtime.NewScheme()
	codecs     = serializer.NewCodecFactory(scheme)
	paramCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	// As client-go's kubernetes/scheme does: the unversioned meta types
	// (options, Status) under v1, then each group.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(nodev1.AddToScheme(scheme))
	utilruntime.Must(rbacv1.AddToScheme(scheme))
	utilruntime.Must(authzv1.AddToScheme(scheme))
}

// api is the part of the Kubernetes API a run uses: one REST client per
// group version over one shared HTTP client (as kubernetes.NewForConfig
// makes them), and the few calls the runner makes on them.
type api struct {
	core, node, rbac, authz *rest.RESTClient
}

// newClients makes the REST clients over one shared HTTP client.
func newClients(cfg *rest.Config) (*api, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", cfg.Host, err)
	}
	mk := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientForConfigAndClient(c, hc)
		if err != nil {
			return nil, fmt.Errorf("%s client: %w", gv, err)
		}
		return rc, nil
	}
	a := &api{}
	if a.core, err = mk(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if a.node, err = mk(nodev1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if a.rbac, err = mk(rbacv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if a.authz, err = mk(authzv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return a, nil
}

// versionTimeout bounds the GET /version call, as client-go's discovery
// client (which made it before) bounds each of its requests.
const versionTimeout = 32 * time.Second

// serverVersion is the API server's GET /version.
func (a *api) serverVersion(ctx context.Context) (*version.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	body, err := a.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("unable to parse the server version: %w", err)
	}
	return &info, nil
}

// The calls below are what client-go's generated clients send: the same
// verbs, paths, options as query parameters and bodies.

func get(ctx context.Context, c *rest.RESTClient, ns, resource, name string, out runtime.Object) error {
	return c.Get().NamespaceIfScoped(ns, ns != "").Resource(resource).Name(name).
		VersionedParams(&metav1.GetOptions{}, paramCodec).Do(ctx).Into(out)
}

func create(ctx context.Context, c *rest.RESTClient, ns, resource string, in, out runtime.Object) error {
	return c.Post().NamespaceIfScoped(ns, ns != "").Resource(resource).
		VersionedParams(&metav1.CreateOptions{}, paramCodec).Body(in).Do(ctx).Into(out)
}

func remove(ctx context.Context, c *rest.RESTClient, ns, resource, name string, opts metav1.DeleteOptions) error {
	return c.Delete().NamespaceIfScoped(ns, ns != "").Resource(resource).Name(name).Body(&opts).Do(ctx).Error()
}

func list(ctx context.Context, c *rest.RESTClient, ns, resource string, opts metav1.ListOptions, out runtime.Object) error {
	return c.Get().NamespaceIfScoped(ns, ns != "").Resource(resource).VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
}

func (a *api) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, get(ctx, a.core, ns, "pods", name, out)
}

func (a *api) createPod(ctx context.Context, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, create(ctx, a.core, ns, "pods", pod, out)
}

func (a *api) deletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return remove(ctx, a.core, ns, "pods", name, opts)
}

// updateEphemeralContainers is PUT pods/<name>/ephemeralcontainers.
func (a *api) updateEphemeralContainers(ctx context.Context, ns, name string, pod *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := a.core.Put().Namespace(ns).Resource("pods").Name(name).SubResource("ephemeralcontainers").
		VersionedParams(&metav1.UpdateOptions{}, paramCodec).Body(pod).Do(ctx).Into(out)
	return out, err
}

func (a *api) createNamespace(ctx context.Context, ns *corev1.Namespace) error {
	return create(ctx, a.core, "", "namespaces", ns, &corev1.Namespace{})
}

func (a *api) getNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	out := &corev1.Namespace{}
	return out, get(ctx, a.core, "", "namespaces", name, out)
}

func (a *api) deleteNamespace(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return remove(ctx, a.core, "", "namespaces", name, opts)
}

func (a *api) listNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	return out, list(ctx, a.core, "", "nodes", opts, out)
}

func (a *api) listEvents(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	return out, list(ctx, a.core, ns, "events", opts, out)
}

func (a *api) getRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	out := &nodev1.RuntimeClass{}
	return out, get(ctx, a.node, "", "runtimeclasses", name, out)
}

func (a *api) createAccessReview(ctx context.Context, rev *authzv1.SelfSubjectAccessReview) (*authzv1.SelfSubjectAccessReview, error) {
	out := &authzv1.SelfSubjectAccessReview{}
	return out, create(ctx, a.authz, "", "selfsubjectaccessreviews", rev, out)
}
