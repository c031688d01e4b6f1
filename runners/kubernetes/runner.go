package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// Runner starts pods from the platform's template.
type Runner struct {
	tg         *targets.Target
	cfg        *rest.Config
	cs         *api
	tmpl       *corev1.Pod
	container  int // index of the task container in tmpl
	nsObjs     []runtime.Object
	pool       *targets.Pool
	sock       string
	startLimit time.Duration
	log        *slog.Logger

	plat platform

	imgOnce sync.Once
	img     string
	imgErr  error
}

// callTimeout bounds one API call.
const callTimeout = 20 * time.Second

// New reads the target's kubernetes section and checks the cluster.
func New(ctx context.Context, tg *targets.Target, log *slog.Logger) (*Runner, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := tg.Kubernetes
	r := &Runner{tg: tg, sock: k.Containerd, log: log}
	if r.sock == "" {
		r.sock = targets.DefaultContainerd
	}
	if k.StartTimeout != "" {
		r.startLimit, _ = time.ParseDuration(k.StartTimeout) // validated by targets
	}
	if len(k.Pools) == 1 {
		r.pool = &k.Pools[0]
	}
	var err error
	kc := tg.KubernetesPath(k.Kubeconfig)
	if r.cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kc, err)
	}
	r.cfg.Timeout = 0 // exec streams outlive one call; calls carry their own deadline
	if r.cs, err = newClients(r.cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kc, err)
	}
	if r.tmpl, err = readTemplate(tg.KubernetesPath(k.PodTemplate)); err != nil {
		return nil, err
	}
	r.container = -1
	for i, c := range r.tmpl.Spec.Containers {
		if k.Container == "" || c.Name == k.Container {
			r.container = i
			break
		}
	}
	if r.container < 0 {
		return nil, fmt.Errorf("pod template %s has no container %q (kubernetes.container)", k.PodTemplate, k.Container)
	}
	if k.Namespace != "" {
		if r.nsObjs, err = readNamespaceObjects(tg.KubernetesPath(k.Namespace)); err != nil {
			return nil, err
		}
	}
	if err := r.check(ctx, kc); err != nil {
		return nil, err
	}
	r.readPlatform(ctx)
	if k.ProbeImage != "" {
		r.img = k.ProbeImage
		r.imgOnce.Do(func() {})
	}
	return r, nil
}

// check makes sure the API server answers and that the kubeconfig's user
// may do what a run does: make and delete namespaces, pods and the
// namespace's objects, and exec into pods.
func (r *Runner) check(ctx context.Context, kc string) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := r.cs.serverVersion(ctx)
	if err != nil {
		return fmt.Errorf("API server %s (kubeconfig %s) does not answer: %w", r.cfg.Host, kc, err)
	}
	r.log.Debug("cluster", "server", r.cfg.Host, "version", v.GitVersion)
	type want struct{ verb, group, resource, sub string }
	wants := []want{{"create", "", "namespaces", ""}, {"delete", "", "namespaces", ""},
		{"create", "", "pods", ""}, {"get", "", "pods", ""}, {"delete", "", "pods", ""}, {"create", "", "pods", "exec"},
		{"update", "", "pods", "ephemeralcontainers"}}
	for _, o := range r.nsObjs {
		gvk := o.GetObjectKind().GroupVersionKind()
		wants = append(wants, want{"create", gvk.Group, strings.ToLower(gvk.Kind) + "s", ""})
	}
	var denied []string
	for _, w := range wants {
		rev, err := r.cs.createAccessReview(cctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: w.verb, Group: w.group, Resource: w.resource, Subresource: w.sub}},
		})
		if err != nil {
			return fmt.Errorf("asking API server %s what kubeconfig %s may do: %w", r.cfg.Host, kc, err)
		}
		if !rev.Status.Allowed {
			res := w.resource
			if w.sub != "" {
				res += "/" + w.sub
			}
			denied = append(denied, w.verb+" "+res)
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("kubeconfig %s: its user may not %s on %s (a run needs it)", kc, strings.Join(denied, ", "), r.cfg.Host)
	}
	return nil
}

// Name is "kubernetes".
func (r *Runner) Name() string { return "kubernetes" }

// Capabilities: pods can be inspected through the API; the harness network,
// task launch, host PIDs, the CPU meter and residue searches are not
// offered by this runner.
func (r *Runner) Capabilities() runners.Capabilities {
	return runners.Capabilities{Inspect: true, ProbeDelivery: true}
}

// probeImage is the image the init container copies the probe from.
func (r *Runner) probeImage(ctx context.Context, probeDir string) (string, error) {
	r.imgOnce.Do(func() {
		r.img, r.imgErr = ensureProbeImage(ctx, r.sock, filepath.Join(probeDir, runners.ProbeBinary))
	})
	return r.img, r.imgErr
}

// Start creates a namespace and the task's pod in it and waits until the
// task container runs. On any failure both are deleted.
func (r *Runner) Start(ctx context.Context, spec runners.SandboxSpec) (runners.Sandbox, error) {
	limit := spec.StartTimeout
	if r.startLimit > 0 {
		limit = r.startLimit
	}
	if limit <= 0 {
		limit = 90 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	img, err := r.probeImage(sctx, spec.ProbeDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	// A fresh suffix: a sandbox restarted under the same name must not meet
	// its predecessor's namespace, still terminating.
	var sfx [3]byte
	_, _ = rand.Read(sfx[:])
	ns := dnsName(spec.Name + "-" + hex.EncodeToString(sfx[:]))
	sb := &Sandbox{r: r, ns: ns, pod: "task", container: r.tmpl.Spec.Containers[r.container].Name, log: r.log.With("sandbox", ns)}
	if err := sb.create(sctx, spec, img); err != nil {
		sb.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	if err := sb.waitRunning(sctx); err != nil {
		sb.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: %w", runners.ErrStart, err)
	}
	return sb, nil
}

// dnsName makes a sandbox name a valid namespace name (a DNS label): lower
// case, at most 63 characters, a hash of the whole name kept at the end
// when it must be cut.
func dnsName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-")
	if len(out) > 63 {
		sum := sha256.Sum256([]byte(s))
		out = strings.Trim(out[:54], "-") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return out
}

// errNotReady marks a pod that will never run as it stands.
var errNotReady = errors.New("pod will not run")
