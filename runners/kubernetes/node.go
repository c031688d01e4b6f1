package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandcheck/sandcheck/runners"
)

// cgroupRoot is this machine's cgroup v1 hierarchy, where a pod's process
// limit is read (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

// nodeSpec is the part of a container's OCI spec, as the node's containerd
// holds it, that the view reads.
type nodeSpec struct {
	Linux struct {
		MaskedPaths []string        `json:"maskedPaths"`
		CgroupsPath string          `json:"cgroupsPath"`
		Seccomp     json.RawMessage `json:"seccomp"`
	} `json:"linux"`
}

// nodeView adds the node's own view to v, when the node is this machine
// (its containerd socket is here): the task container's OCI spec as
// containerd holds it (the masked paths the runtime applies, whether a
// seccomp filter is set) and the pod's process limit from its pids cgroup
// (the kubelet's podPidsLimit; "max" is none). What it cannot read stays in
// v.Unknown, with why in the runner's log.
func (s *Sandbox) nodeView(ctx context.Context, pod *corev1.Pod, v *runners.RuntimeView) {
	id := ""
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == s.container {
			id = strings.TrimPrefix(st.ContainerID, "containerd://")
		}
	}
	if id == "" || strings.ContainsAny(id, "/ ") {
		return
	}
	if _, err := os.Stat(s.r.sock); err != nil {
		return // a node elsewhere: the API's view only
	}
	out, err := ctr(ctx, s.r.sock, nil, "containers", "info", id)
	if err != nil {
		s.log.Debug("node view: reading the container's spec", "pod", s.ID(), "err", err)
		return
	}
	var info struct {
		Spec nodeSpec `json:"Spec"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		s.log.Debug("node view: parsing the container's spec", "pod", s.ID(), "err", err)
		return
	}
	spec := info.Spec
	v.MaskedPaths = slices.Clone(spec.Linux.MaskedPaths)
	if v.MaskedPaths == nil {
		v.MaskedPaths = []string{}
	}
	v.Unknown = slices.DeleteFunc(v.Unknown, func(f string) bool { return f == "masked_paths" })
	if len(spec.Linux.Seccomp) == 0 || string(spec.Linux.Seccomp) == "null" {
		v.Seccomp = "unconfined"
	}
	if limit, ok := podPidsLimit(spec.Linux.CgroupsPath); ok {
		v.PidsLimit = limit
		v.Unknown = slices.DeleteFunc(v.Unknown, func(f string) bool { return f == "pids_limit" })
	}
}

// podPidsLimit reads the pids.max of the pod's cgroup (the container's
// cgroup's parent) on this machine: 0 for "max" (no limit).
func podPidsLimit(cgroupsPath string) (int64, bool) {
	if !strings.HasPrefix(cgroupsPath, "/") || strings.Contains(cgroupsPath, "..") {
		return 0, false
	}
	b, err := os.ReadFile(path.Join(cgroupRoot, "pids", path.Dir(cgroupsPath), "pids.max"))
	if err != nil || len(b) > 32 {
		return 0, false
	}
	switch t := strings.TrimSpace(string(b)); t {
	case "max":
		return 0, true
	default:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
}
