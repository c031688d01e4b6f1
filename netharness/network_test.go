package netharness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"

	"github.com/sandcheck/sandcheck/canary"
)

// testImage is a FROM scratch + busybox image built for the tests (busybox
// nc works; its wget segfaults there).
const testImage = "sandcheck/runner:dev" // built by `make images`, which `make test` runs first

// needHost skips unless the test runs as root with a reachable Docker engine
// and the test image; CI provides all three, so CI runs these tests.
func needHost(t *testing.T) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("starts containers on a real harness network; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates bridges, addresses and iptables rules")
	}
	docker, err := client.New(client.FromEnv)
	if err != nil {
		t.Skipf("needs a Docker engine: creating client: %v", err)
	}
	t.Cleanup(func() { docker.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := docker.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("needs a reachable Docker engine: %v", err)
	}
	if _, err := docker.ImageInspect(ctx, testImage); err != nil {
		t.Skipf("needs the local image %s: %v", testImage, err)
	}
	return docker
}

// createForTest creates a harness network and closes it at cleanup.
func createForTest(t *testing.T, docker *client.Client, onHit func(canary.Hit)) *Network {
	t.Helper()
	// Other runs on the host hold the harness lock for a while.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	n, err := Create(ctx, Options{RunID: "test-" + randomHex(t), Docker: docker, OnHit: onHit, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("creating harness network: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("closing harness network: %v", err)
		}
	})
	return n
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestNetworkEndToEnd(t *testing.T) {
	docker := needHost(t)
	var mu sync.Mutex
	var streamed []canary.Hit
	n := createForTest(t, docker, func(h canary.Hit) { mu.Lock(); streamed = append(streamed, h); mu.Unlock() })

	checkLayout(t, docker, n)

	runtimes := []string{"runc"}
	if info, err := docker.Info(t.Context(), client.InfoOptions{}); err == nil {
		if _, ok := info.Info.Runtimes["runsc"]; ok {
			runtimes = append(runtimes, "runsc")
		}
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			token := "tok-" + rt + "-" + randomHex(t)
			out := runProbe(t, docker, n, rt, token)
			if !strings.Contains(out, "200 OK") || !strings.Contains(out, n.Metadata().Honey().AWS.RoleName) {
				t.Errorf("container got %q, want a 200 naming the role", out)
			}
			hits := n.Recorder().ByToken(token)
			if len(hits) != 1 {
				t.Fatalf("recorded %d hits for %s, want 1; all hits: %+v", len(hits), token, n.Recorder().Hits())
			}
			h := hits[0]
			if h.Service != canary.ServiceAWS || h.Probe != "metadata.aws-imdsv1" || h.Status != 200 ||
				h.Path != "/latest/meta-data/iam/security-credentials/" {
				t.Errorf("hit %+v is not the container's credentials listing", h)
			}
			ap, err := netip.ParseAddrPort(h.Remote)
			if err != nil || !n.plan.IPRange.Contains(ap.Addr()) {
				t.Errorf("hit came from %q, want an address in the container range %s", h.Remote, n.plan.IPRange)
			}
			mu.Lock()
			seen := slices.ContainsFunc(streamed, func(s canary.Hit) bool { return s.Token == token })
			mu.Unlock() // OnHit takes mu for every later hit
			if !seen {
				t.Errorf("OnHit never saw the hit for %s", token)
			}
			checkCloudCanaries(t, docker, n, rt, "tok-cloud-"+rt+"-"+randomHex(t))
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkGone(t, docker, n)
}

// checkLayout inspects the network as built: the Docker view, the bridge,
// the address, the fence and the listener. The DROP rules are proved by
// inspection, never by sending traffic anywhere.
func checkLayout(t *testing.T, docker *client.Client, n *Network) {
	t.Helper()
	ins, err := docker.NetworkInspect(t.Context(), n.ID(), client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspecting %s: %v", n.Name(), err)
	}
	nw := ins.Network
	if nw.Labels[LabelHarness] != "1" || !strings.HasPrefix(nw.Labels[LabelRun], "test-") {
		t.Errorf("labels %v lack the harness and run labels", nw.Labels)
	}
	if nw.Options[optBridgeName] != n.Bridge() || nw.Options[optMasquerade] != "false" || !bridgePattern.MatchString(n.Bridge()) {
		t.Errorf("options %v: want bridge %s and masquerade off", nw.Options, n.Bridge())
	}
	if len(nw.IPAM.Config) != 1 || nw.IPAM.Config[0].Subnet != n.Subnet() ||
		nw.IPAM.Config[0].IPRange != netip.PrefixFrom(n.Subnet().Addr(), 25) || nw.IPAM.Config[0].Gateway != n.Gateway() {
		t.Errorf("IPAM %+v, want subnet %s, range its lower /25, gateway %s", nw.IPAM.Config, n.Subnet(), n.Gateway())
	}
	if !strings.HasPrefix(n.Subnet().String(), "169.254.") || n.DNS() != n.Gateway().String() || n.MetadataAddr() != "169.254.169.254:80" {
		t.Errorf("subnet %s, dns %s, metadata %s", n.Subnet(), n.DNS(), n.MetadataAddr())
	}

	links, err := linksHoldingMetadata()
	if err != nil || !slices.Equal(links, []string{n.Bridge()}) {
		t.Errorf("169.254.169.254 is on %v (err %v), want only %s", links, err, n.Bridge())
	}
	if on, err := metadataListening(); err != nil || !on {
		t.Errorf("no listener on the metadata address (err %v)", err)
	}
	if l, err := harnessListeners([]netip.Addr{ecsIP, alibabaIP}); err != nil || !slices.Contains(l, "tcp listener on 169.254.170.2:80") || !slices.Contains(l, "tcp listener on 100.100.100.200:80") {
		t.Errorf("listeners on the ECS and Alibaba addresses: %q (err %v), want both on :80", l, err)
	}
	if n.Role(n.ECSAddr()) != "metadata" || n.Role(n.AlibabaAddr()) != "metadata" || !slices.Contains(n.Owned(), ecsIP) || !slices.Contains(n.Owned(), alibabaIP) {
		t.Errorf("ECS and Alibaba addresses: roles %q %q, owned %v", n.Role(n.ECSAddr()), n.Role(n.AlibabaAddr()), n.Owned())
	}
	if l, err := harnessListeners([]netip.Addr{kubeAPIIP}); err != nil || !slices.Equal(l, []string{"tcp listener on 198.51.100.43:443"}) {
		t.Errorf("listeners on the Kubernetes API address: %q (err %v), want one on :443", l, err)
	}
	if n.Role(n.KubeAPIAddr()) != RoleKubeAPI || !slices.Contains(n.Owned(), kubeAPIIP) {
		t.Errorf("Kubernetes API address: role %q, owned %v", n.Role(n.KubeAPIAddr()), n.Owned())
	}

	ipt, err := iptables.New()
	if err != nil {
		t.Fatal(err)
	}
	user, err := ipt.List("filter", "DOCKER-USER")
	if err != nil {
		t.Fatal(err)
	}
	// The open profile: sandboxes on the bridge reach each other, nothing
	// else is forwarded.
	want := []string{"-A DOCKER-USER -i " + n.Bridge() + " -o " + n.Bridge() + " -j ACCEPT",
		"-A DOCKER-USER -i " + n.Bridge() + " -j DROP", "-A DOCKER-USER -o " + n.Bridge() + " -j DROP"}
	if len(user) < 4 || !slices.Equal(user[1:4], want) {
		t.Errorf("DOCKER-USER = %q, want %q at its top", user, want)
	}
	fwd, err := ipt.List("filter", "FORWARD")
	if err != nil {
		t.Fatal(err)
	}
	jump := slices.Index(fwd, "-A FORWARD -j DOCKER-USER")
	first := slices.IndexFunc(fwd, func(l string) bool { return strings.Contains(l, n.Bridge()) })
	if jump < 0 || (first >= 0 && first < jump) {
		t.Errorf("FORWARD = %q: the DOCKER-USER jump must precede every rule naming %s", fwd, n.Bridge())
	}
	input, err := ipt.List("filter", "INPUT")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(input, "-A INPUT -i "+n.Bridge()+" -j DROP") {
		t.Errorf("INPUT = %q lacks the catch-all drop for %s", input, n.Bridge())
	}
	v6, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + n.Bridge() + "/disable_ipv6")
	if rp, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + n.Bridge() + "/rp_filter"); err != nil || string(bytes.TrimSpace(rp)) != "1" {
		t.Errorf("rp_filter on %s = %q (err %v), want 1 (strict)", n.Bridge(), rp, err)
	}
	// IPv6 is on only behind the harness's own fence (TestIPv6Fence).
	if err == nil && string(bytes.TrimSpace(v6)) != "1" && (!n.IPv6() || len(n.rules6) == 0) {
		t.Errorf("IPv6 is on for %s without the IPv6 fence", n.Bridge())
	}
}

// runProbe runs a container on the network that sends one attributed HTTP
// request to the metadata canary, and returns what it printed.
func runProbe(t *testing.T, docker *client.Client, n *Network, runtime, token string) string {
	t.Helper()
	req := "GET /latest/meta-data/iam/security-credentials/ HTTP/1.1\\r\\nHost: 169.254.169.254\\r\\n" +
		"X-Sandcheck-Token: " + token + "/metadata.aws-imdsv1\\r\\nConnection: close\\r\\n\\r\\n"
	return runShell(t, docker, n, runtime, fmt.Sprintf("printf '%s' | nc -w 10 169.254.169.254 80", req))
}

// runShell runs script with sh -c in a container on the network and returns
// what it printed; the container must exit 0.
func runShell(t *testing.T, docker *client.Client, n *Network, runtime, script string) string {
	t.Helper()
	return runShellThen(t, docker, n, runtime, script, nil)
}

// runShellThen is runShell calling started (if set) with the container's ID
// once it runs.
func runShellThen(t *testing.T, docker *client.Client, n *Network, runtime, script string, started func(ctx context.Context, id string)) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	created, err := docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Image: testImage,
		Config: &container.Config{
			Cmd:    []string{"sh", "-c", script},
			Labels: map[string]string{"sandcheck.test": "netharness"},
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode(n.Name()),
			DNS:         []netip.Addr{n.Gateway()}, // never the host's resolver
			Runtime:     runtime,
		},
	})
	if err != nil {
		t.Fatalf("creating container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := docker.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("removing container: %v", err)
		}
	})
	wait := docker.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("starting container: %v", err)
	}
	if started != nil {
		started(ctx, created.ID)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		t.Fatalf("waiting for container: %v", err)
	}
	logs, err := docker.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("reading logs: %v", err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	stdcopy.StdCopy(&stdout, &stderr, io.LimitReader(logs, 1<<20))
	if code != 0 {
		t.Fatalf("container exited %d: stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkGone checks, independently of Leftovers, that nothing remains, then
// that Leftovers agrees.
func checkGone(t *testing.T, docker *client.Client, n *Network) {
	t.Helper()
	nets, err := docker.NetworkList(t.Context(), client.NetworkListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range nets.Items {
		if x.ID == n.ID() || x.Name == n.Name() {
			t.Errorf("docker network %s survived Close", x.Name)
		}
	}
	if _, err := netlink.LinkByName(n.Bridge()); err == nil {
		t.Errorf("bridge %s survived Close", n.Bridge())
	}
	if links, _ := linksHoldingMetadata(); len(links) > 0 {
		t.Errorf("169.254.169.254 still on %v", links)
	}
	ipt, err := iptables.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, chain := range []string{"DOCKER-USER", "INPUT", "FORWARD"} {
		lines, err := ipt.List("filter", chain)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if strings.Contains(l, n.Bridge()) {
				t.Errorf("rule %q survived Close", l)
			}
		}
	}
	if on, _ := metadataListening(); on {
		t.Error("a listener on 169.254.169.254:80 survived Close")
	}
	left, err := n.Leftovers(t.Context())
	if err != nil || len(left) > 0 {
		t.Errorf("Leftovers = %q (err %v), want none", left, err)
	}
}

// checkCloudCanaries has a container ask the ECS task-role and Alibaba
// canaries for their credentials, with a token, and checks the hits.
func checkCloudCanaries(t *testing.T, docker *client.Client, n *Network, runtime, token string) {
	t.Helper()
	get := func(host, path, probe string) string {
		req := "GET " + path + " HTTP/1.1\\r\\nHost: " + host + "\\r\\nX-Sandcheck-Token: " + token + "/" + probe +
			"\\r\\nConnection: close\\r\\n\\r\\n"
		return fmt.Sprintf("printf '%s' | nc -w 10 %s 80", req, host)
	}
	role := n.Metadata().Honey().AlibabaRoleName
	out := runShell(t, docker, n, runtime, get("169.254.170.2", "/v2/credentials/4c0ffee0-0000-4000-8000-000000000001", "metadata.ecs-task-role")+
		"; echo; "+get("100.100.100.200", "/latest/meta-data/ram/security-credentials/"+role, "metadata.alibaba"))
	honey := n.Metadata().Honey()
	if !strings.Contains(out, honey.AWS.AccessKeyID) || !strings.Contains(out, honey.AlibabaAccessKeyID) {
		t.Errorf("container got %q, want both honey access key IDs", out)
	}
	var got []string
	for _, h := range n.Recorder().ByToken(token) {
		got = append(got, h.Service+" "+h.Probe+" "+h.Local+" "+fmt.Sprint(h.Status))
	}
	want := []string{
		canary.ServiceECS + " metadata.ecs-task-role 169.254.170.2:80 200",
		canary.ServiceAlibaba + " metadata.alibaba 100.100.100.200:80 200",
	}
	if !slices.Equal(got, want) {
		t.Errorf("hits with the token: %q, want %q", got, want)
	}
}
