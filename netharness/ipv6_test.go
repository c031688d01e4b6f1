package netharness

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/moby/moby/client"
)

func TestBoundTo6(t *testing.T) {
	// fd00:ec2::254 port 80 listening, 2001:db8::10 port 80 established,
	// ::1 port 53 listening.
	proc := `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A
   1: C20E00FD000000000000000054020000:0050 00000000000000000000000000000000:0000 0A
   2: B80D0120000000000000000010000000:0050 C20E00FD00000000000000000C000200:C350 01
   3: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 0A
   4: garbage
`
	got, err := boundTo(strings.NewReader(proc), []netip.Addr{metadataIP6, outsideIP6}, false)
	want := []netip.AddrPort{netip.MustParseAddrPort("[fd00:ec2::254]:80"), netip.MustParseAddrPort("[2001:db8::10]:80")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("boundTo6 = %v (err %v), want %v", got, err, want)
	}
	got, _ = boundTo(strings.NewReader(proc), []netip.Addr{metadataIP6, outsideIP6}, true)
	if !slices.Equal(got, want[:1]) {
		t.Errorf("boundTo6 listening only = %v, want %v", got, want[:1])
	}
}

func TestIPv6Layout(t *testing.T) {
	if a := sandboxAddr6(netip.MustParseAddr("169.254.120.2")); a != netip.MustParseAddr("fd00:ec2::c:2") || !v6Prefix.Contains(a) {
		t.Errorf("sandboxAddr6 = %s", a)
	}
	// Never the host's own network (fd00::/64 here), and every address the
	// harness holds is in its prefix or the documentation range.
	if v6Prefix.Overlaps(netip.MustParsePrefix("fd00::/64")) {
		t.Errorf("%s overlaps the host's fd00::/64", v6Prefix)
	}
	for _, a := range hostAddrs6() {
		if !v6Prefix.Contains(a) && !docPrefix6.Contains(a) {
			t.Errorf("%s is neither in %s nor in %s", a, v6Prefix, docPrefix6)
		}
	}
	open := inputRules6("scbr-00000000", "open")
	none := inputRules6("scbr-00000000", "mirror-only")
	for name, rules := range map[string][]rule{"open": open, "mirror-only": none} {
		last := rules[len(rules)-1]
		if last.String() != "INPUT -i scbr-00000000 -j DROP" {
			t.Errorf("%s: last INPUT rule %s, want the drop", name, last)
		}
		for _, r := range rules {
			// Every rule that can draw an answer to a routable source
			// takes only the sandboxes' prefix (no forged sources).
			if (slices.Contains(r.spec, "ACCEPT") && !slices.Contains(r.spec, "ipv6-icmp")) || slices.Contains(r.spec, "REJECT") {
				if i := slices.Index(r.spec, "-s"); i < 0 || r.spec[i+1] != v6Prefix.String() {
					t.Errorf("%s: %s takes any source", name, r)
				}
			}
			if slices.Contains(r.spec, "-d") && name != "open" {
				t.Errorf("%s grants an IPv6 destination: %s", name, r)
			}
			if i := slices.Index(r.spec, "-d"); i >= 0 {
				if p := netip.MustParsePrefix(r.spec[i+1]); p.Bits() != 128 || !slices.Contains(hostAddrs6(), p.Addr()) {
					t.Errorf("%s accepts %s, not one harness address", name, r.spec[i+1])
				}
			}
		}
	}
}

// TestIPv6Fence checks the IPv6 side of a real harness network: the fence
// is in place, forwarding stays off, the bridge takes no router
// advertisements; a sandbox given IPv6 reaches the IPv6 metadata canary but
// not the gateway's IPv6 address (a harness address INPUT does not grant,
// with a listener of the test's own), under runc and runsc; and after Close
// nothing IPv6 is left.
func TestIPv6Fence(t *testing.T) {
	docker := needHost(t)
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		t.Fatalf("this host forwards IPv6 (err %v): the harness would leave IPv6 off", err)
	}
	n := createForTest(t, docker, nil)
	if !n.IPv6() || n.Metadata6Addr() != "[fd00:ec2::254]:80" || n.Outside6Addr() != outsideIP6 {
		t.Fatalf("IPv6 %t, metadata %q, outside %s", n.IPv6(), n.Metadata6Addr(), n.Outside6Addr())
	}
	ipt6, err := iptables.NewWithProtocol(iptables.ProtocolIPv6)
	if err != nil {
		t.Fatal(err)
	}
	fwd, _ := ipt6.List("filter", "FORWARD")
	if len(fwd) < 3 || fwd[1] != "-A FORWARD -i "+n.Bridge()+" -j DROP" || fwd[2] != "-A FORWARD -o "+n.Bridge()+" -j DROP" {
		t.Errorf("ip6tables FORWARD = %q, want the bridge's drops first", fwd)
	}
	in, _ := ipt6.List("filter", "INPUT")
	if i := slices.Index(in, "-A INPUT -i "+n.Bridge()+" -j DROP"); i < 0 || i > 5 {
		t.Errorf("ip6tables INPUT = %q, want the bridge's drop after its five accepts", in)
	}
	for _, kv := range bridgeSysctls6 {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + n.Bridge() + "/" + kv[0])
		if err != nil || strings.TrimSpace(string(b)) != kv[1] {
			t.Errorf("bridge %s = %q (err %v), want %s", kv[0], b, err, kv[1])
		}
	}
	if l, err := harnessListeners([]netip.Addr{metadataIP6, outsideIP6}); err != nil || !slices.Contains(l, "tcp6 listener on [fd00:ec2::254]:80") || !slices.Contains(l, "tcp6 listener on [2001:db8::10]:80") {
		t.Errorf("IPv6 listeners %q (err %v)", l, err)
	}
	// A listener on the gateway's IPv6 address: a harness address, but not
	// one INPUT grants, so nothing may reach it.
	gw, err := net.Listen("tcp6", "[fd00:ec2::1]:7007")
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := gw.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	runtimes := []string{"runc"}
	if info, err := docker.Info(t.Context(), client.InfoOptions{}); err == nil {
		if _, ok := info.Info.Runtimes["runsc"]; ok {
			runtimes = append(runtimes, "runsc")
		}
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			token := "tok6-" + rt + "-" + randomHex(t)
			req := "GET /latest/meta-data/ HTTP/1.1\\r\\nHost: x\\r\\nX-Sandcheck-Token: " + token + "/metadata.aws-imds-ipv6\\r\\nConnection: close\\r\\n\\r\\n"
			out := runAttached6(t, docker, n, rt, "sleep 3; printf '"+req+"' | nc -w 5 fd00:ec2::254 80; echo; "+
				"if nc -w 3 fd00:ec2::1 7007 </dev/null; then echo GATEWAY-OPEN; else echo GATEWAY-SHUT; fi")
			if !strings.Contains(out, "200 OK") || !strings.Contains(out, "GATEWAY-SHUT") {
				t.Errorf("sandbox output %q: want a 200 from the IPv6 metadata canary and the gateway shut", out)
			}
			hits := n.Recorder().ByToken(token)
			if len(hits) != 1 || !strings.HasPrefix(hits[0].Remote, "[fd00:ec2::c:") || hits[0].Local != "[fd00:ec2::254]:80" {
				t.Errorf("hits %+v, want one from the sandbox's IPv6 address on the IPv6 metadata canary", hits)
			}
		})
	}
	if reached.Load() != 0 {
		t.Errorf("%d connection(s) reached the gateway's IPv6 address past the fence", reached.Load())
	}
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		t.Errorf("IPv6 forwarding on after the sandboxes (err %v)", err)
	}
	gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left, err := n.leftovers6(); err != nil || len(left) > 0 {
		t.Errorf("IPv6 leftovers %q (err %v)", left, err)
	}
	if rules, _ := harnessRulesIn(ipt6, sweptChains6, ""); len(rules) > 0 {
		t.Errorf("ip6tables rules left: %v", rules)
	}
	if fwd, err := IPv6Forwarding(); err != nil || fwd {
		t.Errorf("IPv6 forwarding on after Close (err %v)", err)
	}
}

// runAttached6 is runShell giving the container IPv6 as the engine does
// (AttachIPv6) once it runs.
func runAttached6(t *testing.T, docker *client.Client, n *Network, runtime, script string) string {
	t.Helper()
	return runShellThen(t, docker, n, runtime, script, func(ctx context.Context, id string) {
		if err := n.AttachIPv6(ctx, id); err != nil {
			t.Errorf("AttachIPv6: %v", err)
		}
	})
}

// TestIPv6RefusedWhenForwarding points the forwarding switch at a file of
// the test's own that says 1 (the host's is only read, never written): the
// harness then leaves IPv6 off, touching no rule, sysctl or address, and
// attaches no sandbox; an unreadable switch counts as on.
func TestIPv6RefusedWhenForwarding(t *testing.T) {
	old := ipv6ForwardingPath
	t.Cleanup(func() { ipv6ForwardingPath = old })
	dir := t.TempDir()
	for name, content := range map[string]string{"on": "1\n", "garbage": "yes\n", "missing": ""} {
		ipv6ForwardingPath = dir + "/" + name
		if content != "" {
			if err := os.WriteFile(ipv6ForwardingPath, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		n := &Network{log: slog.New(slog.DiscardHandler), bridge: "scbr-00000000"}
		if err := n.setupIPv6("open"); err != nil || n.IPv6() || n.addr6Done || len(n.rules6) > 0 || n.ipt6 != nil {
			t.Errorf("%s: setupIPv6 err %v, v6 %t, touched %t/%d", name, err, n.IPv6(), n.addr6Done, len(n.rules6))
		}
		if n.Metadata6Addr() != "" || n.Outside6Addr().IsValid() {
			t.Errorf("%s: IPv6 addresses handed out without IPv6", name)
		}
		n.v6 = true // as if forwarding went on mid-run
		if err := n.AttachIPv6(t.Context(), "c0ffee"); err == nil {
			t.Errorf("%s: AttachIPv6 went ahead while forwarding is on", name)
		}
	}
}
