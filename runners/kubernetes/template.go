package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// maxManifest bounds a pod template or namespace file.
const maxManifest = 1 << 20

// nsKinds are the kinds a namespace file may hold; readKinds all the kinds
// the runner reads (the template's Pod and nsKinds).
const (
	nsKinds   = "ServiceAccount, Role, RoleBinding, ResourceQuota, LimitRange, ConfigMap, Secret"
	readKinds = "Pod (the pod template); " + nsKinds + " (the namespace file)"
)

// readManifests decodes every YAML document of a file into typed objects.
func readManifests(path string) ([]runtime.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxManifest)
	}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []runtime.Object
	for i := 1; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		obj, gvk, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
		var tm metav1.TypeMeta
		if runtime.IsNotRegisteredError(err) && yaml.Unmarshal(doc, &tm) == nil {
			// The runner's scheme has only the groups it reads (clients.go).
			return nil, fmt.Errorf("%s: document %d is a %s %s, which sandcheck does not read; allowed: %s", path, i, tm.APIVersion, tm.Kind, readKinds)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d does not parse as a Kubernetes object: %w", path, i, err)
		}
		if gvk == nil {
			return nil, fmt.Errorf("%s: document %d has no kind", path, i)
		}
		out = append(out, obj)
	}
	return out, nil
}

// readTemplate reads the platform's pod template: one Pod.
func readTemplate(path string) (*corev1.Pod, error) {
	objs, err := readManifests(path)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("pod template %s: want exactly one Pod, found %d objects", path, len(objs))
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod template %s: want a Pod, found %T", path, objs[0])
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod template %s: the Pod has no containers", path)
	}
	return pod, nil
}

// readNamespaceObjects reads what the platform creates in each task's
// namespace; only the kinds listed are accepted.
func readNamespaceObjects(path string) ([]runtime.Object, error) {
	objs, err := readManifests(path)
	if err != nil {
		return nil, err
	}
	for i, o := range objs {
		switch o.(type) {
		case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *corev1.ResourceQuota, *corev1.LimitRange,
			*corev1.ConfigMap, *corev1.Secret:
		default:
			return nil, fmt.Errorf("namespace file %s: object %d is a %T; allowed: %s", path, i+1, o, nsKinds)
		}
	}
	return objs, nil
}
