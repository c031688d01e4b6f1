package kubernetes

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandcheck/sandcheck/runners"
)

// withRunEnv fits the platform's template to one run: the run's
// placeholders expanded in its host paths and environment values (a
// template that plants the harness's honey credentials names them), the
// harness's folders (an output folder bound to the host, the inputs
// folder) added to the task container as hostPath volumes, and the
// harness's tmpfs mounts (a gated output folder) as memory-backed
// emptyDirs of their size. A hostPath names a folder of the pod's node:
// the run's folders are this machine's, so a target that declares them
// needs the node to be this machine (the sandcheck cluster). Devices
// cannot be handed to a pod: a run that prepared some is refused.
func (r *Runner) withRunEnv(env runners.RunEnv) error {
	if len(env.Devices) > 0 {
		return errors.New("the kubernetes runner cannot hand devices to a pod (a pod template asks its node for them)")
	}
	p := &r.tmpl.Spec
	if env.Expand != nil {
		for i := range p.Volumes {
			if hp := p.Volumes[i].HostPath; hp != nil {
				hp.Path = env.Expand(hp.Path)
			}
		}
		for _, cs := range [][]corev1.Container{p.InitContainers, p.Containers} {
			for i := range cs {
				for j := range cs[i].Env {
					cs[i].Env[j].Value = env.Expand(cs[i].Env[j].Value)
				}
			}
		}
	}
	c := &p.Containers[r.container]
	dir := corev1.HostPathDirectory
	for i, m := range env.Mounts {
		name := "sandcheck-run-" + strconv.Itoa(i)
		p.Volumes = append(p.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.Source, Type: &dir}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	for i, t := range env.Tmpfs {
		name := "sandcheck-tmpfs-" + strconv.Itoa(i)
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if t.Size != "" {
			q, err := resource.ParseQuantity(t.Size)
			if err != nil {
				return fmt.Errorf("tmpfs %s: size %q: %w", t.Path, t.Size, err)
			}
			ed.SizeLimit = &q
		}
		p.Volumes = append(p.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: t.Path})
	}
	return nil
}
