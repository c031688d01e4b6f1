package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// The harness's own IPv6 addresses (netharness/ipv6.go): the bridge's
// prefix, where sandboxes get their addresses, the IPv6 metadata address
// and the IPv6 outside address.
var (
	harnessPrefix6 = netip.MustParsePrefix("fd00:ec2::/64")
	harnessOwned6  = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("2001:db8::10")}
)

// ipv6Forwarding reads the host's net.ipv6.conf.all.forwarding.
func ipv6Forwarding(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/forwarding")
	if err != nil {
		t.Fatalf("reading IPv6 forwarding: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// checkNoIPv6Leftovers fails when a harness IPv6 address is still on a
// link, an ip6tables rule names a harness bridge, or the kernel forwards
// IPv6 (the harness never turns that on).
func checkNoIPv6Leftovers(t *testing.T) {
	t.Helper()
	if f := ipv6Forwarding(t); f != "0" {
		t.Errorf("net.ipv6.conf.all.forwarding = %s after the run, want 0", f)
	}
	out, err := exec.Command("ip", "-6", "-o", "addr").Output()
	if err != nil {
		t.Fatalf("ip -6 addr: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "fd00:ec2:") || strings.Contains(l, "2001:db8:") {
			t.Errorf("a harness IPv6 address outlived the run: %s", l)
		}
	}
	r6, err := exec.Command("ip6tables", "-S").Output()
	if err != nil {
		t.Fatalf("ip6tables -S: %v", err)
	}
	if strings.Contains(string(r6), "scbr-") {
		t.Errorf("ip6tables rules naming a harness bridge outlived the run:\n%s", r6)
	}
}

// TestIPv6Controls runs the IPv6 probes with both controls. The weak
// reference, under runc and under gVisor (runsc with --network=host uses
// the container's network namespace, where the harness put the sandbox's
// IPv6 address and route after start), reaches the IPv6 metadata canary
// and the IPv6 outside sink from its harness IPv6 address, and nothing
// else; the hardened references (no network) are blocked. Throughout, the
// kernel forwards no IPv6 and the harness leaves no IPv6 state behind.
func TestIPv6Controls(t *testing.T) {
	binDir(t)
	if f := ipv6Forwarding(t); f != "0" {
		t.Fatalf("net.ipv6.conf.all.forwarding = %s before the run; the harness refuses IPv6 then", f)
	}
	for _, tg := range []string{"fixtures/targets/weak.yaml", weakUnderGVisor(t)} {
		r := sandcheck(t, "run", "--target", tg, "--quiet", "--probes", "*ipv6*")
		rec := r.mustRecord(t)
		if len(rec.Results) != 2 {
			t.Fatalf("%s: %d results, want metadata.aws-imds-ipv6 and egress.ipv6", tg, len(rec.Results))
		}
		for i, res := range rec.Results {
			if rec.Effective(i) != probes.Escaped {
				t.Errorf("%s %s: effective %s (%s), want escaped", tg, res.Probe, rec.Effective(i), res.Detail)
			}
			kind := map[string]string{"metadata.aws-imds-ipv6": "metadata-hit", "egress.ipv6": "sink-hit"}[res.Probe]
			it, ok := hostItem(res, evidence.SourceCanary, kind)
			if !ok {
				t.Errorf("%s %s: no %s with the probe's token: %+v", tg, res.Probe, kind, res.Evidence)
				continue
			}
			from, err := parseDest(it.Data["remote"])
			if err != nil || !harnessPrefix6.Contains(from) {
				t.Errorf("%s %s: the canary saw the probe from %q, want a sandbox address in %s", tg, res.Probe, it.Data["remote"], harnessPrefix6)
			}
		}
		for _, h := range canaryHits(t, r.out) {
			a, err := parseDest(h.Local)
			if err == nil && a.Is6() && !a.Is4In6() && !slices.Contains(harnessOwned6, a) {
				t.Errorf("%s: a %s hit arrived on %s, not a harness IPv6 address", tg, h.Service, h.Local)
			}
		}
		checkNoIPv6Leftovers(t)
	}
	for _, tg := range []string{"hardened", "hardened-gvisor"} {
		r := sandcheck(t, "run", "--target", "fixtures/targets/"+tg+".yaml", "--quiet", "--probes", "*ipv6*")
		rec := r.mustRecord(t)
		for i, res := range rec.Results {
			if res.Outcome != probes.Blocked || rec.Effective(i) != probes.Blocked {
				t.Errorf("%s %s: %s / effective %s (%s), want blocked", tg, res.Probe, res.Outcome, rec.Effective(i), res.Detail)
			}
		}
		checkNoIPv6Leftovers(t)
	}
}
