package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandcheck/sandcheck/runners"
)

// Inspect is the cluster's view of the task container: the pod as the API
// server holds it (spec and status) and the RuntimeClass's handler, the
// runtime the node runs it under; and where the node is this machine, the
// node's own view (nodeView): the masked paths and seccomp filter its
// containerd applies, the pod's process limit in its cgroup.
func (s *Sandbox) Inspect(ctx context.Context) (runners.RuntimeView, error) {
	pod, err := s.r.cs.getPod(ctx, s.ns, s.pod)
	if err != nil {
		return runners.RuntimeView{}, fmt.Errorf("inspecting pod %s: %w", s.ID(), err)
	}
	handler := "runc" // the node's default runtime
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		got, err := s.r.cs.getRuntimeClass(ctx, *rc)
		if err != nil {
			return runners.RuntimeView{}, fmt.Errorf("inspecting RuntimeClass %s of pod %s: %w", *rc, s.ID(), err)
		}
		handler = got.Handler
	}
	v := viewOf(pod, s.container, handler)
	s.nodeView(ctx, pod, &v)
	return v, nil
}

// viewOf maps a pod's spec and status to the runtime view.
func viewOf(pod *corev1.Pod, container, handler string) runners.RuntimeView {
	v := runners.RuntimeView{Runtime: handler, Hostname: pod.Spec.Hostname, Labels: pod.Labels,
		Unknown: []string{"masked_paths", "pids_limit"}}
	if v.Hostname == "" {
		v.Hostname = pod.Name
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		v.Unknown = append(v.Unknown, "container "+container+" not in the pod")
		return v
	}
	v.Image = c.Image
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	v.Privileged = sc.Privileged != nil && *sc.Privileged
	uid, gid := sc.RunAsUser, sc.RunAsGroup
	if uid == nil {
		uid = psc.RunAsUser
	}
	if gid == nil {
		gid = psc.RunAsGroup
	}
	if uid != nil {
		v.User = strconv.FormatInt(*uid, 10)
		if gid != nil {
			v.User += ":" + strconv.FormatInt(*gid, 10)
		}
	}
	if caps := sc.Capabilities; caps != nil {
		for _, a := range caps.Add {
			v.CapAdd = append(v.CapAdd, strings.TrimPrefix(string(a), "CAP_"))
		}
		for _, d := range caps.Drop {
			v.CapDrop = append(v.CapDrop, strings.TrimPrefix(string(d), "CAP_"))
		}
	}
	prof := sc.SeccompProfile
	if prof == nil {
		prof = psc.SeccompProfile
	}
	v.Seccomp = "unconfined" // Kubernetes' default without a profile
	if prof != nil {
		switch prof.Type {
		case corev1.SeccompProfileTypeRuntimeDefault:
			v.Seccomp = "default"
		case corev1.SeccompProfileTypeLocalhost:
			v.Seccomp = "custom"
		}
	}
	v.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	v.ReadOnlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
		v.SecurityOpt = append(v.SecurityOpt, "procMount=Unmasked")
	}
	vols := map[string]corev1.Volume{}
	for _, vol := range pod.Spec.Volumes {
		vols[vol.Name] = vol
	}
	for _, m := range c.VolumeMounts {
		vm := runners.Mount{Destination: m.MountPath, ReadOnly: m.ReadOnly, Type: "volume", Source: m.Name}
		if vol, ok := vols[m.Name]; ok {
			switch {
			case vol.HostPath != nil:
				vm.Type, vm.Source = "bind", vol.HostPath.Path
			case vol.EmptyDir != nil && vol.EmptyDir.Medium == corev1.StorageMediumMemory:
				vm.Type = "tmpfs"
			case vol.Projected != nil:
				vm.Type = "projected"
			case vol.Secret != nil:
				vm.Type = "secret"
			case vol.ConfigMap != nil:
				vm.Type = "configmap"
			}
		}
		v.Mounts = append(v.Mounts, vm)
	}
	v.NetworkMode = "pod"
	if pod.Spec.HostNetwork {
		v.NetworkMode = "host"
	}
	if pod.Spec.HostPID {
		v.SecurityOpt = append(v.SecurityOpt, "hostPID")
	}
	if pod.Spec.HostIPC {
		v.SecurityOpt = append(v.SecurityOpt, "hostIPC")
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		v.MemoryBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		v.NanoCPUs = q.MilliValue() * 1_000_000
	}
	for _, e := range c.Env {
		v.Env = append(v.Env, e.Name)
	}
	slices.Sort(v.Env)
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != container {
			continue
		}
		v.ImageDigest = st.ImageID
		switch {
		case st.State.Running != nil:
			v.State = "running"
		case st.State.Terminated != nil:
			v.State, v.ExitCode = "exited", int(st.State.Terminated.ExitCode)
			v.OOMKilled = st.State.Terminated.Reason == "OOMKilled"
		case st.State.Waiting != nil:
			v.State = "waiting: " + st.State.Waiting.Reason
		}
	}
	return v
}
