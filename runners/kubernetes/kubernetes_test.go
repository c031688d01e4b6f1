package kubernetes

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

const fixtures = "../../fixtures/kubernetes/"

func TestTemplatesParse(t *testing.T) {
	for _, f := range []string{"pod-hardened.yaml", "pod-weak.yaml", "pod-scoped.yaml"} {
		if _, err := readTemplate(fixtures + f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"namespace-hardened.yaml", "namespace-weak.yaml", "namespace-scoped.yaml"} {
		objs, err := readNamespaceObjects(fixtures + f)
		if err != nil || len(objs) < 2 {
			t.Errorf("%s: %d objects, %v", f, len(objs), err)
		}
	}
}

func TestTemplateRejects(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"not yaml":       "apiVersion: v1\nkind: Pod\nspec: [",
		"two objects":    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c}]}\n",
		"not a pod":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"no containers":  "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {}\n",
		"unknown kind":   "apiVersion: v1\nkind: Bogus\nmetadata: {name: a}\n",
		"other group":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n",
		"empty document": "",
	}
	for name, body := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readTemplate(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: want an error naming %s, got %v", name, p, err)
		}
	}
	p := filepath.Join(dir, "ns.yaml")
	os.WriteFile(p, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n"), 0o644)
	if _, err := readNamespaceObjects(p); err == nil || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("a Pod in the namespace file: want refused, got %v", err)
	}
	// A kind of a group the runner's scheme does not hold is refused by
	// name, with what is allowed.
	os.WriteFile(p, []byte("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a}\nspec: {podSelector: {}}\n"), 0o644)
	if _, err := readNamespaceObjects(p); err == nil || !strings.Contains(err.Error(), "networking.k8s.io/v1 NetworkPolicy") || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("a NetworkPolicy in the namespace file: want refused by name, got %v", err)
	}
}

func TestPodFor(t *testing.T) {
	tmpl, err := readTemplate(fixtures + "pod-hardened.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{tg: &targets.Target{Image: "sandcheck/runner:dev"}, tmpl: tmpl,
		pool: &targets.Pool{Name: "gvisor", RuntimeClass: "gvisor", NodeSelector: map[string]string{"pool": "g"},
			Tolerations: []targets.Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule"}}}}
	pod := r.podFor("ns1", "task", runners.SandboxSpec{Hostname: "h1", Env: map[string]string{"B": "2", "A": "1"}}, "sandcheck.local/probe:x",
		map[string]string{"sandcheck.run": "r1"})
	if pod.Namespace != "ns1" || pod.Name != "task" || pod.Labels["sandcheck.run"] != "r1" || pod.Labels["platform.example/role"] != "agent-task" {
		t.Errorf("meta: %+v", pod.ObjectMeta)
	}
	s := pod.Spec
	if s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor" || s.NodeSelector["pool"] != "g" || len(s.Tolerations) != 1 || s.Hostname != "h1" {
		t.Errorf("pool settings not applied: %+v", s)
	}
	if len(s.InitContainers) != 1 || s.InitContainers[0].Image != "sandcheck.local/probe:x" || s.InitContainers[0].ImagePullPolicy != "Never" {
		t.Fatalf("init container: %+v", s.InitContainers)
	}
	// A sidecar (it keeps running) whose startup probe gates the task: an
	// init container that exits never completes under gVisor here.
	if ic := s.InitContainers[0]; ic.RestartPolicy == nil || *ic.RestartPolicy != "Always" || ic.StartupProbe == nil || ic.StartupProbe.Exec == nil {
		t.Errorf("probe delivery is not a sidecar with a startup probe: %+v", ic)
	}
	c := s.Containers[0]
	if c.Image != "sandcheck/runner:dev" || c.ImagePullPolicy != "Never" || c.Command[0] != "/.sandcheck/sandcheck-probe" || c.Command[1] != "hold" {
		t.Errorf("task container: %+v", c)
	}
	if c.Env[0].Name != "A" || c.Env[1].Name != "B" {
		t.Errorf("env not sorted: %+v", c.Env)
	}
	last := c.VolumeMounts[len(c.VolumeMounts)-1]
	if last.MountPath != runners.ProbeMount || !last.ReadOnly {
		t.Errorf("probe mount: %+v", last)
	}
	// The template itself is untouched.
	if len(tmpl.Spec.InitContainers) != 0 || tmpl.Spec.Containers[0].Image != "placeholder" {
		t.Errorf("template modified: %+v", tmpl.Spec)
	}
}

func TestViewOf(t *testing.T) {
	tmpl, _ := readTemplate(fixtures + "pod-weak.yaml")
	tmpl.Spec.HostNetwork = true
	v := viewOf(tmpl, "task", "runc")
	if !v.Privileged || v.User != "0" || v.NetworkMode != "host" || v.Seccomp != "unconfined" || v.ReadOnlyRootfs || v.NoNewPrivileges {
		t.Errorf("weak view: %+v", v)
	}
	if len(v.Mounts) != 5 || v.Mounts[0].Type != "bind" || v.Mounts[0].Source != "/" || v.Mounts[0].Destination != "/host" ||
		v.Mounts[4].Type != "tmpfs" || v.Mounts[4].Destination != "/dev/shm" {
		t.Errorf("weak mounts: %+v", v.Mounts)
	}
	if !strings.Contains(strings.Join(v.SecurityOpt, ","), "hostPID") || !strings.Contains(strings.Join(v.Env, ","), "GITHUB_TOKEN,HOST_IP,NODE_NAME") {
		t.Errorf("weak: %+v", v)
	}
	tmpl, _ = readTemplate(fixtures + "pod-hardened.yaml")
	v = viewOf(tmpl, "task", "runsc")
	if v.Privileged || v.User != "65534:65534" || v.Seccomp != "custom" || !v.ReadOnlyRootfs || !v.NoNewPrivileges ||
		v.MemoryBytes != 256<<20 || v.NanoCPUs != 1e9 || strings.Join(v.CapDrop, ",") != "ALL" || v.Runtime != "runsc" || v.NetworkMode != "pod" {
		t.Errorf("hardened view: %+v", v)
	}
	if len(v.Mounts) != 1 || v.Mounts[0].Type != "tmpfs" {
		t.Errorf("hardened mounts: %+v", v.Mounts)
	}
}

func TestDNSName(t *testing.T) {
	long := strings.Repeat("Sandcheck_run ", 10)
	for _, in := range []string{"sandcheck-20261201t151403-abcd1234-shared", long, "A.B"} {
		got := dnsName(in)
		if len(got) > 63 || !dnsLabelRE.MatchString(got) {
			t.Errorf("dnsName(%q) = %q, not a DNS label", in, got)
		}
	}
	if dnsName(long) == dnsName(long+"x") {
		t.Error("two long names made the same namespace")
	}
}

func TestOCIArchive(t *testing.T) {
	b, err := ociArchive("sandcheck.local/probe:abc", map[string][]byte{probeInImage: []byte("probe"), busyboxInImage: []byte("bb")})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %s %v", files["index.json"], err)
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != "sandcheck.local/probe:abc" {
		t.Errorf("annotations: %v", m.Annotations)
	}
	if _, ok := files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]; !ok || files["oci-layout"] == nil {
		t.Errorf("manifest blob or oci-layout missing: %v", m.Digest)
	}
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// TestProbeImageImport builds the probe image and imports it into a real
// containerd (SANDCHECK_TEST_CONTAINERD names its socket; the cluster
// stage sets it), then imports again, which must find it there.
func TestProbeImageImport(t *testing.T) {
	sock := os.Getenv("SANDCHECK_TEST_CONTAINERD")
	if sock == "" {
		t.Skip("SANDCHECK_TEST_CONTAINERD is not set (no containerd to import into)")
	}
	probe := filepath.Join(t.TempDir(), runners.ProbeBinary)
	if err := os.WriteFile(probe, []byte("not really a probe "+t.Name()), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	name, err := ensureProbeImage(ctx, sock, probe)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ctr(ctx, sock, nil, "images", "ls", "-q")
	if err != nil || !strings.Contains(list, name+"\n") {
		t.Fatalf("image %s not in containerd: %v\n%s", name, err, list)
	}
	if again, err := ensureProbeImage(ctx, sock, probe); err != nil || again != name {
		t.Errorf("second import: %s, %v", again, err)
	}
	if _, err := ctr(ctx, sock, nil, "images", "rm", name); err != nil {
		t.Error(err)
	}
}

// The template's identity variables (labels, host name) are filled per
// task, and the run's placeholders and folders reach the pod.
func TestPodForIdentityAndRunEnv(t *testing.T) {
	tmpl, err := readTemplate(fixtures + "pod-weak.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Labels = map[string]string{"acme.io/run": "${SANDCHECK_RUN_ID}", "acme.io/task": "${SANDCHECK_TASK}"}
	tmpl.Spec.Hostname = "${SANDCHECK_RUN_ID}-${SANDCHECK_TASK}"
	r := &Runner{tg: &targets.Target{Image: "sandcheck/runner:dev"}, tmpl: tmpl}
	expand := func(s string) string {
		return strings.NewReplacer("${SANDCHECK_RUN_DIR}", "/run/x", "${SANDCHECK_SCOPED_KEY}", "key1").Replace(s)
	}
	err = r.withRunEnv(runners.RunEnv{Expand: expand,
		Mounts: []targets.Mount{{Source: "/run/x/output", Target: "/out"}, {Source: "/run/x/inputs", Target: "/inputs", ReadOnly: true}},
		Tmpfs:  []targets.Tmpfs{{Path: "/gated", Size: "8Mi"}}})
	if err != nil {
		t.Fatal(err)
	}
	pod := r.podFor("ns1", "task", runners.SandboxSpec{}, "probe:x",
		map[string]string{"sandcheck.run": "r1", "sandcheck.target": "t1", "sandcheck.task": "Shared_1"})
	if pod.Labels["acme.io/run"] != "r1" || pod.Labels["acme.io/task"] != "Shared_1" || pod.Spec.Hostname != "r1-shared-1" {
		t.Errorf("identity: labels %v, hostname %q", pod.Labels, pod.Spec.Hostname)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if hp := vols["home"].HostPath; hp == nil || hp.Path != "/run/x/home" {
		t.Errorf("home volume: %+v", vols["home"])
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	for path, src := range map[string]string{"/out": "/run/x/output", "/inputs": "/run/x/inputs"} {
		m, ok := mounts[path]
		if !ok || vols[m.Name].HostPath == nil || vols[m.Name].HostPath.Path != src || m.ReadOnly != (path == "/inputs") {
			t.Errorf("%s: mount %+v, volume %+v", path, m, vols[m.Name])
		}
	}
	if m, ok := mounts["/gated"]; !ok || vols[m.Name].EmptyDir == nil || vols[m.Name].EmptyDir.Medium != corev1.StorageMediumMemory ||
		vols[m.Name].EmptyDir.SizeLimit.String() != "8Mi" {
		t.Errorf("gated tmpfs: %+v", vols[m.Name])
	}
	var key string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "PLATFORM_API_KEY" {
			key = e.Value
		}
	}
	if key != "key1" {
		t.Errorf("scoped key in the environment: %q", key)
	}
	if err := r.withRunEnv(runners.RunEnv{Devices: []targets.Device{{Source: "/dev/kmsg", Target: "/dev/kmsg"}}}); err == nil {
		t.Error("devices accepted")
	}
}

// A pod's process limit is its cgroup's pids.max ("max": none); a path that
// leaves the hierarchy or a file that is not a number tells nothing.
func TestPodPidsLimit(t *testing.T) {
	root := t.TempDir()
	defer func(r string) { cgroupRoot = r }(cgroupRoot)
	cgroupRoot = root
	for pod, v := range map[string]string{"a": "max\n", "b": "256\n", "c": "lots\n"} {
		d := filepath.Join(root, "pids", "kubepods", "pod"+pod)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "pids.max"), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path string
		want int64
		ok   bool
	}{
		{"/kubepods/poda/c1", 0, true},
		{"/kubepods/podb/c1", 256, true},
		{"/kubepods/podc/c1", 0, false},
		{"/kubepods/podz/c1", 0, false},
		{"kubepods/podb/c1", 0, false},
		{"/kubepods/../../podb/c1", 0, false},
	} {
		if got, ok := podPidsLimit(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
