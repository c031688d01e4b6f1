package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

func careless() targets.Docker {
	d := weak("runc")
	d.Network = "host"
	d.DockerHost = targets.DockerHost{
		Privileged: true, IPC: "host", UTS: "host", Cgroupns: "host", Userns: "host",
		Sysctls: map[string]string{"kernel.msgmax": "65536"}, GroupAdd: []string{"0"},
		Volumes:    []targets.Volume{{Name: "sandcheck-test-shared", Target: "/shared"}},
		ExtraHosts: []string{"db:10.0.0.5"}, OOMKillDisable: true, OOMScoreAdj: -500,
		CPUShares: 512, CpusetCPUs: "0", Init: true,
	}
	return d
}

// TestHostSettingsMapped: every DockerHost key lands in the HostConfig field
// of the same meaning.
func TestHostSettingsMapped(t *testing.T) {
	s, err := newSettings(careless())
	if err != nil {
		t.Fatal(err)
	}
	hc, err := s.hostConfig(runners.SandboxSpec{ProbeDir: "/p"}, "host")
	if err != nil {
		t.Fatal(err)
	}
	if !hc.Privileged || hc.IpcMode != "host" || hc.UTSMode != "host" || hc.CgroupnsMode != "host" || hc.UsernsMode != "host" ||
		hc.Sysctls["kernel.msgmax"] != "65536" || !slices.Equal(hc.GroupAdd, []string{"0"}) || !slices.Equal(hc.ExtraHosts, []string{"db:10.0.0.5"}) ||
		hc.OomKillDisable == nil || !*hc.OomKillDisable || hc.OomScoreAdj != -500 || hc.CPUShares != 512 || hc.CpusetCpus != "0" ||
		hc.Init == nil || !*hc.Init || hc.NetworkMode != "host" {
		t.Errorf("host config %+v", hc)
	}
	if !slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool {
		return m.Type == mount.TypeVolume && m.Source == "sandcheck-test-shared" && m.Target == "/shared"
	}) {
		t.Errorf("no volume mount in %+v", hc.Mounts)
	}
	bad := careless()
	bad.IPC = "container:x"
	if _, err := newSettings(bad); err == nil {
		t.Error("ipc container:x accepted by the runner")
	}
}

// TestUnconfinedNetworkRefusesNetworkProbes starts a real sandbox in the
// host's network namespace (it sends nothing) and asks it to run a network
// probe: the runner refuses, whatever the engine asks, while other commands
// run.
func TestUnconfinedNetworkRefusesNetworkProbes(t *testing.T) {
	requireEngine(t)
	cfg := weak("runc")
	cfg.Network = "host"
	spec, _ := testSpec(t, fakeProbe(t))
	sb := start(t, cfg, spec)
	var netProbe string
	for _, s := range probes.Catalog() {
		if s.Category == "metadata" {
			netProbe = s.ID
			break
		}
	}
	_, err := sb.Exec(context.Background(), []string{"/.sandcheck/sandcheck-probe", "run", netProbe})
	if !errors.Is(err, ErrNetworkProbeRefused) {
		t.Fatalf("network probe %s on host network: %v", netProbe, err)
	}
	if res := run(t, sb, "/.sandcheck/sandcheck-probe", "exit", "3"); res.ExitCode != 3 {
		t.Errorf("a plain exec: exit %d", res.ExitCode)
	}
	in, err := engineClient(t).ContainerInspect(context.Background(), sb.ID(), client.ContainerInspectOptions{})
	if err != nil || string(in.Container.HostConfig.NetworkMode) != "host" {
		t.Fatalf("inspect: %v %v", err, in.Container.HostConfig)
	}
}

// TestUnconfinedNetworkRefusesNetworkProbeTasks: in task launch mode the
// probe is the sandbox's first process; on a host network the runner refuses
// to create such a sandbox at all.
func TestUnconfinedNetworkRefusesNetworkProbeTasks(t *testing.T) {
	requireEngine(t)
	var netProbe string
	for _, s := range probes.Catalog() {
		if s.Category == "metadata" {
			netProbe = s.ID
			break
		}
	}
	for _, network := range []string{"host", "bridge"} {
		cfg := weak("runc")
		cfg.Network = network
		spec, mark := testSpec(t, fakeProbe(t))
		doc, err := probes.Params{Token: "t", Probes: []string{netProbe}}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		spec.Command = []string{"/.sandcheck/sandcheck-probe", "run", "--token", "t", "--params", doc}
		r, err := New(cfg, testImage)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := r.Start(context.Background(), spec)
		if sb != nil {
			_ = sb.Close(context.Background())
		}
		if !errors.Is(err, ErrNetworkProbeRefused) {
			t.Errorf("network %s: task %s started: %v", network, netProbe, err)
		}
		if left := leftovers(t, mark); len(left) > 0 {
			t.Errorf("network %s: a container was created: %v", network, left)
		}
	}
}

// TestNamedNetworkConfinement: a named Docker network counts as confined only
// when it is internal (no route off the host).
func TestNamedNetworkConfinement(t *testing.T) {
	requireEngine(t)
	cli := engineClient(t)
	ctx := context.Background()
	for _, internal := range []bool{true, false} {
		name := fmt.Sprintf("sandcheck-test-confine-%v-%d", internal, os.Getpid())
		if _, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Internal: internal, Labels: map[string]string{labelTest: "confine"}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}) })
		if got := unconfinedNetwork(ctx, cli, name, ""); got == internal {
			t.Errorf("network %s (internal %v): unconfined %v", name, internal, got)
		}
	}
	if !unconfinedNetwork(ctx, cli, "sandcheck-no-such-network", "") {
		t.Error("a network that cannot be inspected counts as confined")
	}
	if unconfinedNetwork(ctx, cli, "none", "") || unconfinedNetwork(ctx, cli, "h1", "h1") || !unconfinedNetwork(ctx, cli, "host", "") {
		t.Error("none, the harness network or host misclassified")
	}
}
