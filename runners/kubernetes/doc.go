// Package kubernetes is the kubernetes runner (`runner: kubernetes`): each
// sandbox is one pod made from the platform's own pod template, in a fresh
// namespace of its own, through client-go.
//
// The template's security context, RuntimeClass, resources, service-account
// automount, volumes and host namespaces are kept as they are. The runner
// sets the pod's name, namespace and labels, the task container's image
// (the target's) and command (the probe binary's sleeper), and delivers the
// probe binary: an init container from a first-party image (the probe
// binary and a static busybox, FROM scratch, built from the run's own probe
// binary and imported into the node's containerd, never pulled) copies it
// into an emptyDir mounted read-only at /.sandcheck. Probes run through the
// pod exec subresource.
//
// Every pod and namespace a run makes is deleted when its sandbox closes,
// also when the pod never started (Pending, ImagePullBackOff...); the start
// error then names the pod, its state and its last events. Everything read
// from the cluster (exec output, logs) is bounded.
package kubernetes
