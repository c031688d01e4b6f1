package targets

import (
	"strings"
	"testing"
)

// TestCarelessConfigurationsAreDescribable: host networking, cap_add ALL and
// a label such as acme.io/run were refused before, so a platform running them
// could not be graded.
func TestCarelessConfigurationsAreDescribable(t *testing.T) {
	tg, err := Parse("t.yaml", []byte(strings.Replace(minimal, "network: none", "network: host", 1)+
		"  cap_add: [ALL]\n  labels: {acme.io/run: \"${SANDCHECK_RUN_ID}\", Team: x}\n  privileged: true\n  ipc: host\n  uts: host\n"+
		"  cgroupns: host\n  userns: host\n  sysctls: {net.ipv4.ip_forward: \"1\"}\n  group_add: [docker, \"999\"]\n"+
		"  volumes:\n    - {name: shared-cache, target: /cache}\n  extra_hosts: [\"db:10.0.0.5\"]\n  oom_kill_disable: true\n"+
		"  oom_score_adj: -500\n  cpu_shares: 512\n  cpuset_cpus: \"0-1\"\n  init: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := tg.Docker
	if !tg.SharesHostNetwork() || !d.Privileged || d.IPC != "host" || d.Sysctls["net.ipv4.ip_forward"] != "1" ||
		len(d.Volumes) != 1 || d.Volumes[0].Name != "shared-cache" || d.Labels["acme.io/run"] == "" || d.CpusetCPUs != "0-1" {
		t.Errorf("decoded %+v", d)
	}
	if tg2, _ := Parse("t.yaml", []byte(minimal)); tg2.SharesHostNetwork() {
		t.Error("network none shares the host's")
	}
}

func TestDockerHostErrors(t *testing.T) {
	for field, src := range map[string]string{
		"$.docker.ipc":                "  ipc: container:x\n",
		"$.docker.uts":                "  uts: private\n",
		"$.docker.sysctls.bad key":    "  sysctls: {\"bad key\": \"1\"}\n",
		"$.docker.group_add[0]":       "  group_add: [\"a b\"]\n",
		"$.docker.volumes[0].name":    "  volumes:\n    - {name: \"/host\", target: /v}\n",
		"$.docker.volumes[0].target":  "  volumes:\n    - {name: v, target: v}\n",
		"$.docker.extra_hosts[0]":     "  extra_hosts: [\"nocolon\"]\n",
		"$.docker.oom_score_adj":      "  oom_score_adj: 5000\n",
		"$.docker.cpuset_cpus":        "  cpuset_cpus: \"all\"\n",
		"$.docker.labels.sandcheck.x": "  labels: {sandcheck.x: y}\n",
		"$.docker.labels.a b":         "  labels: {\"a b\": y}\n",
	} {
		_, err := Parse("t.yaml", []byte(minimal+src))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
