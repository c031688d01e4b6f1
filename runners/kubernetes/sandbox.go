package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// Sandbox is one pod in a namespace of its own.
type Sandbox struct {
	r         *Runner
	ns, pod   string
	container string
	uid       string
	img       string // the probe image (probe binary and busybox)
	agents    int    // ephemeral containers Spawn added
	log       *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// holdMax bounds the sleepers' lives: a pod the harness lost ends by itself.
const holdMax = 30 * time.Minute

// probeVolume is the emptyDir the init container fills with the probe.
const probeVolume = "sandcheck-probe"

// ID is "namespace/pod".
func (s *Sandbox) ID() string { return s.ns + "/" + s.pod }

// labelsFor keeps the spec's labels that are valid Kubernetes labels.
func labelsFor(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	return out
}

// create makes the namespace, the platform's namespace objects and the pod.
func (s *Sandbox) create(ctx context.Context, spec runners.SandboxSpec, img string) error {
	cs := s.r.cs
	labels := labelsFor(spec.Labels)
	labels["app.kubernetes.io/managed-by"] = "sandcheck"
	if err := cs.createNamespace(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: s.ns, Labels: labels}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", s.ns, err)
	}
	for _, o := range s.r.nsObjs {
		if err := createIn(ctx, s, o.DeepCopyObject()); err != nil {
			return err
		}
	}
	s.img = img
	pod := s.r.podFor(s.ns, s.pod, spec, img, labels)
	// The namespace's default ServiceAccount appears a moment after the
	// namespace; until then the API server refuses pods.
	for {
		created, err := cs.createPod(ctx, s.ns, pod)
		if err == nil {
			s.uid = string(created.UID)
			return nil
		}
		if !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount")) {
			return fmt.Errorf("creating pod %s/%s: %w", s.ns, s.pod, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("creating pod %s/%s: %w (last: %w)", s.ns, s.pod, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createIn creates one of the platform's namespace objects in s's namespace.
func createIn(ctx context.Context, s *Sandbox, o runtime.Object) error {
	cs, ns := s.r.cs, s.ns
	var err error
	var what string
	switch v := o.(type) {
	case *corev1.ServiceAccount:
		v.Namespace, what = ns, "ServiceAccount "+v.Name
		err = create(ctx, cs.core, ns, "serviceaccounts", v, &corev1.ServiceAccount{})
	case *rbacv1.Role:
		v.Namespace, what = ns, "Role "+v.Name
		err = create(ctx, cs.rbac, ns, "roles", v, &rbacv1.Role{})
	case *rbacv1.RoleBinding:
		v.Namespace, what = ns, "RoleBinding "+v.Name
		for i := range v.Subjects {
			if v.Subjects[i].Kind == rbacv1.ServiceAccountKind && v.Subjects[i].Namespace == "" {
				v.Subjects[i].Namespace = ns
			}
		}
		err = create(ctx, cs.rbac, ns, "rolebindings", v, &rbacv1.RoleBinding{})
	case *corev1.ResourceQuota:
		v.Namespace, what = ns, "ResourceQuota "+v.Name
		err = create(ctx, cs.core, ns, "resourcequotas", v, &corev1.ResourceQuota{})
	case *corev1.LimitRange:
		v.Namespace, what = ns, "LimitRange "+v.Name
		err = create(ctx, cs.core, ns, "limitranges", v, &corev1.LimitRange{})
	case *corev1.ConfigMap:
		v.Namespace, what = ns, "ConfigMap "+v.Name
		err = create(ctx, cs.core, ns, "configmaps", v, &corev1.ConfigMap{})
	case *corev1.Secret:
		v.Namespace, what = ns, "Secret "+v.Name
		err = create(ctx, cs.core, ns, "secrets", v, &corev1.Secret{})
	default:
		return fmt.Errorf("namespace %s: cannot create a %T", ns, o)
	}
	if err != nil {
		return fmt.Errorf("creating %s in namespace %s: %w", what, ns, err)
	}
	return nil
}

// podFor is the template made into one task's pod.
func (r *Runner) podFor(ns, name string, spec runners.SandboxSpec, img string, labels map[string]string) *corev1.Pod {
	pod := r.tmpl.DeepCopy()
	pod.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: maps.Clone(r.tmpl.Labels), Annotations: maps.Clone(r.tmpl.Annotations)}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	// The identity the platform's template gives each pod (its labels and
	// host name may name ${SANDCHECK_RUN_ID}, ${SANDCHECK_TARGET} and
	// ${SANDCHECK_TASK}, as a docker target's do), filled for this task.
	id := targets.Identity{RunID: labels["sandcheck.run"], Target: labels["sandcheck.target"], Task: labels["sandcheck.task"]}
	for k, v := range pod.Labels {
		pod.Labels[k] = id.Expand(v)
	}
	maps.Copy(pod.Labels, labels)
	p := &pod.Spec
	p.RestartPolicy = corev1.RestartPolicyNever
	if p.Hostname != "" {
		p.Hostname = (&targets.Docker{Hostname: p.Hostname}).IdentityHostname(id)
	}
	if spec.Hostname != "" {
		p.Hostname = spec.Hostname
	}
	if r.pool != nil {
		if r.pool.RuntimeClass != "" {
			rc := r.pool.RuntimeClass
			p.RuntimeClassName = &rc
		}
		if len(r.pool.NodeSelector) > 0 {
			if p.NodeSelector == nil {
				p.NodeSelector = map[string]string{}
			}
			maps.Copy(p.NodeSelector, r.pool.NodeSelector)
		}
		for _, t := range r.pool.Tolerations {
			p.Tolerations = append(p.Tolerations, corev1.Toleration{Key: t.Key,
				Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
	}
	p.Volumes = append(p.Volumes, corev1.Volume{Name: probeVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	nobody := int64(65534)
	no, yes := false, true
	// The probe binary comes from a sidecar (an init container that keeps
	// running) rather than an init container that exits: under gVisor
	// through the runc shim a pod's second container's exit is never seen
	// (the shim watches the sandbox's process, which stays), so an init
	// container never completes. The task starts once the startup probe
	// finds the copy in place.
	always := corev1.ContainerRestartPolicyAlways
	bb := "/" + busyboxInImage
	p.InitContainers = append([]corev1.Container{{
		Name: "sandcheck-probe", Image: img, ImagePullPolicy: corev1.PullNever, RestartPolicy: &always,
		// The shell, PID 1 of its container, leaves on SIGTERM (PID 1
		// ignores a signal it has no handler for): a sleeping sidecar would
		// hold the pod's deletion for its whole grace period.
		Command: []string{bb, "sh", "-c", `"$0" cp "$1" /out/.sandcheck-probe.part && "$0" mv /out/.sandcheck-probe.part /out/sandcheck-probe || exit 1
trap "exit 0" TERM
"$0" sleep "$2" & wait`,
			bb, "/" + probeInImage, strconv.Itoa(int(holdMax.Seconds()))},
		VolumeMounts: []corev1.VolumeMount{{Name: probeVolume, MountPath: "/out"}},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{bb, "test", "-x", "/out/sandcheck-probe"}}},
			PeriodSeconds: 1, FailureThreshold: 120, TimeoutSeconds: 5},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &nobody, RunAsGroup: &nobody, RunAsNonRoot: &yes,
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}}, p.InitContainers...)
	c := &p.Containers[r.container]
	c.Image = r.tg.Image
	c.ImagePullPolicy = corev1.PullNever
	c.Command = []string{runners.ProbeMount + "/" + runners.ProbeBinary, "hold", "--max", holdMax.String()}
	c.Args = nil
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: probeVolume, MountPath: runners.ProbeMount, ReadOnly: true})
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	return pod
}

// readyExecTimeout bounds one readiness exec of the probe binary.
const readyExecTimeout = 10 * time.Second

// waitRunning polls the pod until its task container runs and the probe
// binary answers `list` in it, or fails fast when the pod cannot run
// (unschedulable, image not present, config error, a container that
// ended). The exec catches a holder that dies at once: the kubelet may
// report it running for a moment first.
func (s *Sandbox) waitRunning(ctx context.Context) error {
	var last *corev1.Pod
	lastExec := ""
	for {
		pod, err := s.r.cs.getPod(ctx, s.ns, s.pod)
		if err == nil {
			last = pod
			if ok, why := podRunning(pod, s.container); ok {
				err := runners.ProbeAnswers(ctx, s, readyExecTimeout)
				if err == nil {
					return nil
				}
				if ctx.Err() == nil {
					lastExec = "; " + err.Error()
				}
			} else if why != "" {
				return fmt.Errorf("pod %s/%s %w: %s%s", s.ns, s.pod, errNotReady, why, s.events(ctx))
			}
		}
		select {
		case <-ctx.Done():
			state := "never seen"
			if last != nil {
				state = podState(last)
			}
			return fmt.Errorf("pod %s/%s did not run within the start timeout: %s%s%s", s.ns, s.pod, state, lastExec,
				s.events(context.WithoutCancel(ctx)))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// badWaiting are the waiting reasons that do not resolve by themselves.
var badWaiting = []string{"ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}

// podRunning says whether the task container runs, and if it never will,
// why.
func podRunning(pod *corev1.Pod, container string) (bool, string) {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false, "phase " + string(pod.Status.Phase) + ": " + podState(pod)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, "unschedulable: " + c.Message
		}
	}
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && slices.Contains(badWaiting, w.Reason) {
			return false, fmt.Sprintf("container %s waiting: %s: %s", st.Name, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil && (t.ExitCode != 0 || st.Name == container) {
			return false, fmt.Sprintf("container %s terminated: %s (exit %d) %s", st.Name, t.Reason, t.ExitCode, t.Message)
		}
		if st.Name == container && st.State.Running != nil {
			return true, ""
		}
	}
	return false, ""
}

// podState is a one-line summary of a pod's status.
func podState(pod *corev1.Pod) string {
	parts := []string{"phase " + string(pod.Status.Phase)}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", st.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// events lists the pod's last events (at most 8), for an error.
func (s *Sandbox) events(ctx context.Context) string {
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := s.r.cs.listEvents(ectx, s.ns, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	items := list.Items
	if len(items) > 8 {
		items = items[len(items)-8:]
	}
	var b strings.Builder
	b.WriteString("; events:")
	for _, e := range items {
		fmt.Fprintf(&b, " [%s %s %s: %s]", e.Type, e.InvolvedObject.Kind, e.Reason, strings.TrimSpace(e.Message))
	}
	return b.String()
}

// CopyIn is not offered: the probe arrives through the init container.
func (s *Sandbox) CopyIn(context.Context, string, string) error {
	return errors.New("kubernetes runner: copying files into a pod is not supported")
}

// Close deletes the pod with a short grace period and its namespace (with
// everything the run made in it), and waits, bounded, for the pod to be
// gone from the API server. A pod deleted with a grace period stays there
// until its node has stopped its containers and released its volumes and
// cgroups, so its absence is the node's word that nothing of it is left; a
// forced delete (grace 0) removes the object at once and leaves the node to
// clean up in the background. A pod still present at the bound is
// force-deleted and reported. Safe twice.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait+10*time.Second)
		defer cancel()
		grace := int64(closeGrace / time.Second)
		bg := metav1.DeletePropagationBackground
		var errs []error
		err := s.r.cs.deletePod(cctx, s.ns, s.pod, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", s.ns, s.pod, err))
		}
		err = s.r.cs.deleteNamespace(cctx, s.ns, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting namespace %s: %w", s.ns, err))
		}
		if err := s.waitGone(cctx, closeWait); err != nil {
			zero := int64(0)
			ferr := s.r.cs.deletePod(cctx, s.ns, s.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if ferr != nil && !apierrors.IsNotFound(ferr) {
				err = fmt.Errorf("%w; forced delete: %w", err, ferr)
			}
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Bounds of Close: the grace period the pod's containers get to leave, and
// how long the node gets to report the pod stopped and released.
const (
	closeGrace = 1 * time.Second
	closeWait  = 90 * time.Second
)

// waitGone polls until the pod is gone from the API server, at most d.
func (s *Sandbox) waitGone(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last *corev1.Pod
	for {
		pod, err := s.r.cs.getPod(ctx, s.ns, s.pod)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			last = pod
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			state := "state unknown"
			if last != nil {
				state = podState(last)
			}
			return fmt.Errorf("pod %s/%s still present %s after its delete (the node has not released it: %s); forced its delete",
				s.ns, s.pod, d, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// VerifyTeardown lists what of the sandbox survived Close: the pod, and the
// namespace unless it is already terminating.
func (s *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	var left []string
	if _, err := s.r.cs.getPod(ctx, s.ns, s.pod); err == nil {
		left = append(left, "pod "+s.ID())
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("looking for pod %s: %w", s.ID(), err)
	}
	ns, err := s.r.cs.getNamespace(ctx, s.ns)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("looking for namespace %s: %w", s.ns, err)
	case ns.DeletionTimestamp == nil:
		left = append(left, "namespace "+s.ns)
	}
	return left, nil
}
