package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandcheck/sandcheck/runners"
)

// spawnWait bounds how long Spawn waits for its container to run.
const spawnWait = 60 * time.Second

// Spawn starts argv beside the task as user (a numeric uid) with env
// added, and returns once it runs, without waiting for it: a platform agent
// beside the task. On Kubernetes that is a container of the pod; Spawn adds
// it as an ephemeral container from the probe image (argv must name the
// probe binary under runners.ProbeMount, where that image holds it)
// targeting the task container, so it shares the task's process namespace
// as an agent process beside the task would. Pod exec cannot choose a user
// or an environment; an ephemeral container can.
func (s *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	if !strings.HasPrefix(argv[0], runners.ProbeMount+"/") {
		return fmt.Errorf("spawn of %s in pod %s/%s: only the probe binary can run beside the task", argv[0], s.ns, s.pod)
	}
	uid, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		return fmt.Errorf("spawn of %s in pod %s/%s: user %q is not a numeric uid", argv[0], s.ns, s.pod, user)
	}
	s.agents++
	name := fmt.Sprintf("sandcheck-agent-%d", s.agents)
	var envs []corev1.EnvVar
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envs = append(envs, corev1.EnvVar{Name: k, Value: v})
	}
	nonRoot := uid != 0
	ec := corev1.EphemeralContainer{TargetContainerName: s.container,
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: s.img, ImagePullPolicy: corev1.PullNever,
			Command: argv, Env: envs,
			SecurityContext: &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &nonRoot},
		}}
	pod, err := s.r.cs.getPod(ctx, s.ns, s.pod)
	if err != nil {
		return fmt.Errorf("spawn of %s: reading pod %s/%s: %w", argv[0], s.ns, s.pod, err)
	}
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ec)
	if _, err := s.r.cs.updateEphemeralContainers(ctx, s.ns, s.pod, pod); err != nil {
		return fmt.Errorf("spawn of %s: adding ephemeral container %s to pod %s/%s: %w", argv[0], name, s.ns, s.pod, err)
	}
	wctx, cancel := context.WithTimeout(ctx, spawnWait)
	defer cancel()
	for {
		pod, err := s.r.cs.getPod(wctx, s.ns, s.pod)
		if err == nil {
			for _, st := range pod.Status.EphemeralContainerStatuses {
				if st.Name != name {
					continue
				}
				if st.State.Running != nil {
					return nil
				}
				if t := st.State.Terminated; t != nil {
					return fmt.Errorf("spawn of %s: ephemeral container %s of pod %s/%s ended: %s (exit %d) %s", argv[0], name, s.ns, s.pod, t.Reason, t.ExitCode, t.Message)
				}
				if w := st.State.Waiting; w != nil && slices.Contains(badWaiting, w.Reason) {
					return fmt.Errorf("spawn of %s: ephemeral container %s of pod %s/%s waiting: %s: %s", argv[0], name, s.ns, s.pod, w.Reason, w.Message)
				}
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("spawn of %s: ephemeral container %s of pod %s/%s did not run within %s%s", argv[0], name, s.ns, s.pod, spawnWait, s.events(context.WithoutCancel(ctx)))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
