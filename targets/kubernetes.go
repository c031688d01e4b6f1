package targets

import (
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// Kubernetes is how the kubernetes runner starts sandboxes: as pods made
// from the platform's own pod template, in a cluster a kubeconfig names.
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file sandcheck uses (relative to the
	// target file); its current context names the cluster and the user.
	Kubeconfig string `yaml:"kubeconfig"`
	// PodTemplate is the platform's own pod spec: a YAML file holding one
	// Pod (relative to the target file). Its security context, RuntimeClass,
	// resources, service-account automount, volumes and host namespaces are
	// used as they are; sandcheck sets only the name, namespace, the task
	// container's image and command, and adds the probe's delivery (an init
	// container and an emptyDir at /.sandcheck).
	PodTemplate string `yaml:"pod_template"`
	// Container names the template's container that runs the task; empty
	// means the first.
	Container string `yaml:"container,omitempty"`
	// Namespace is a YAML file of objects the platform creates in each
	// task's namespace (ServiceAccount, Role, RoleBinding, ResourceQuota,
	// LimitRange), relative to the target file; empty means none. Each
	// sandbox gets a fresh namespace, deleted with it.
	Namespace string `yaml:"namespace,omitempty"`
	// ProbeImage is an image already on the nodes that holds the probe
	// binary at /.sandcheck/sandcheck-probe and a static busybox at
	// /bin/busybox. Empty: sandcheck builds one from the run's probe binary
	// and imports it into the node's containerd through Containerd.
	ProbeImage string `yaml:"probe_image,omitempty"`
	// Containerd is the node's containerd socket on this machine, for
	// importing the probe image and for the node's own view of each
	// sandbox; empty means /run/sandcheck-cluster/containerd.sock (the
	// cluster `make cluster` starts).
	Containerd string `yaml:"containerd,omitempty"`
	// StartTimeout bounds how long a pod may take to run, e.g. 90s; empty
	// means the run's start timeout.
	StartTimeout string `yaml:"start_timeout,omitempty"`
	// Pools are the fleet's node pools: one run verifies each, in
	// parallel, and reports pool by pool. Empty means the template as it is.
	Pools []Pool `yaml:"pools,omitempty"`
}

// Pool is one node pool of a fleet: where its pods land and how they run.
type Pool struct {
	// Name names the pool in reports (lower-case letters, digits, '-').
	Name string `yaml:"name"`
	// NodeSelector is added to the template's node selector.
	NodeSelector map[string]string `yaml:"node_selector,omitempty"`
	// Tolerations are added to the template's tolerations.
	Tolerations []Toleration `yaml:"tolerations,omitempty"`
	// RuntimeClass replaces the template's runtimeClassName (runc, gvisor
	// on the sandcheck cluster); empty keeps the template's.
	RuntimeClass string `yaml:"runtime_class,omitempty"`
}

// Toleration is a pod toleration of a node taint, as Kubernetes spells it.
type Toleration struct {
	// Key is the taint's key; empty with operator Exists tolerates all.
	Key string `yaml:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	Operator string `yaml:"operator,omitempty"`
	// Value is the taint's value (operator Equal).
	Value string `yaml:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute; empty matches all.
	Effect string `yaml:"effect,omitempty"`
}

// DefaultContainerd is the socket of the containerd the sandcheck cluster
// scripts start (scripts/cluster/up.sh).
const DefaultContainerd = "/run/sandcheck-cluster/containerd.sock"

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

func (v *validator) checkKubernetes(k *Kubernetes) {
	if k.Kubeconfig == "" {
		v.add("$.kubernetes.kubeconfig", "is required: the kubeconfig file of the cluster")
	}
	if k.PodTemplate == "" {
		v.add("$.kubernetes.pod_template", "is required: the platform's pod template (a Pod YAML file)")
	}
	if k.StartTimeout != "" {
		if d, err := time.ParseDuration(k.StartTimeout); err != nil || d <= 0 {
			v.add("$.kubernetes.start_timeout", "must be a positive duration such as 90s (got %q)", k.StartTimeout)
		}
	}
	if k.Containerd != "" && !filepath.IsAbs(k.Containerd) {
		v.add("$.kubernetes.containerd", "must be an absolute socket path (got %q)", k.Containerd)
	}
	seen := map[string]bool{}
	for i, p := range k.Pools {
		path := fmt.Sprintf("$.kubernetes.pools[%d]", i)
		if !dnsLabel.MatchString(p.Name) {
			v.add(path+".name", "must be lower-case letters, digits or '-', at most 32 (got %q)", p.Name)
		}
		if seen[p.Name] {
			v.add(path+".name", "pool %q is listed twice", p.Name)
		}
		seen[p.Name] = true
		for j, t := range p.Tolerations {
			tp := fmt.Sprintf("%s.tolerations[%d]", path, j)
			switch t.Operator {
			case "", "Equal":
			case "Exists":
				if t.Value != "" {
					v.add(tp+".value", "must be empty with operator Exists")
				}
			default:
				v.add(tp+".operator", "%q is not Equal or Exists", t.Operator)
			}
			switch t.Effect {
			case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
			default:
				v.add(tp+".effect", "%q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
			}
		}
	}
}

// KubernetesPath resolves a file the kubernetes section names (relative to
// the target file's folder).
func (t *Target) KubernetesPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(t.Path), p)
}

// ForPool returns a copy of the target for one pool of its fleet: named
// <target>.<pool>, with only that pool.
func (t *Target) ForPool(p Pool) *Target {
	c := *t
	k := *t.Kubernetes
	k.Pools = []Pool{p}
	c.Kubernetes = &k
	c.Name = t.Name + "." + p.Name
	return &c
}

// Pool returns the target narrowed to one pool of its fleet (see ForPool);
// an unknown pool is an error naming the pools there are.
func (t *Target) Pool(name string) (*Target, error) {
	if t.Kubernetes == nil {
		return nil, fmt.Errorf("target %s: pool %q: the target has no kubernetes section", t.Path, name)
	}
	var names []string
	for _, p := range t.Kubernetes.Pools {
		if p.Name == name {
			return t.ForPool(p), nil
		}
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("target %s: no pool %q (pools: %v)", t.Path, name, names)
}

// PoolNames lists the fleet's pools in the file's order; nil when the
// target is not a fleet.
func (t *Target) PoolNames() []string {
	if t.Kubernetes == nil {
		return nil
	}
	var out []string
	for _, p := range t.Kubernetes.Pools {
		out = append(out, p.Name)
	}
	return out
}
