package e2e

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// harnessOutside are the documentation addresses the harness holds on its
// bridge as "outside" (netharness: the sinks, the second resolver and the
// package mirror).
var harnessOutside = []netip.Addr{netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.53"), harnessMirror}

var metadataIP = netip.MustParseAddr("169.254.169.254")

// harnessCloudMetadata are the ECS task-role and Alibaba Cloud metadata
// addresses and the Kubernetes API address the harness holds on its bridge
// with their own canaries.
var harnessCloudMetadata = []netip.Addr{netip.MustParseAddr("169.254.170.2"), netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddrPort(harnessKubeAPI).Addr()}

// TestWeakEgressReachesOnlyHarnessAddresses runs the egress and metadata
// probes on the weak reference, where they escape, and checks that every
// destination seen, by the canaries, by the kernel tracer and in the probes'
// own reports, is an address the harness owns on this machine (the run's
// bridge subnet, the metadata address, the outside addresses, and their
// IPv6 twins) or the sandbox's own loopback. Nothing went anywhere else.
func TestWeakEgressReachesOnlyHarnessAddresses(t *testing.T) {
	r := sandcheck(t, "run", "--target", "fixtures/targets/weak.yaml", "--quiet", "--label-filter", "egress || metadata")
	rec := r.mustRecord(t)
	hits := canaryHits(t, r.out)
	if len(hits) == 0 {
		t.Fatal("no canary hit recorded: the weak reference must reach the canaries")
	}
	// The run's subnet, from the sandbox addresses the canaries saw.
	var subnet netip.Prefix
	for _, h := range hits {
		from, err := parseDest(h.Remote) // an ICMP hit's peer has no port
		if err == nil && (slices.Contains(harnessOutside, from) || slices.Contains(harnessCloudMetadata, from)) {
			continue // the harness's proxy relaying a tunnel, from the host's side
		}
		if err == nil && harnessPrefix6.Contains(from) {
			continue // a sandbox's IPv6 address on the harness bridge
		}
		if err != nil || !netip.MustParsePrefix("169.254.0.0/16").Contains(from) {
			t.Errorf("hit from %q, not a sandbox on a harness bridge", h.Remote)
			continue
		}
		p, _ := from.Prefix(24)
		if subnet.IsValid() && p != subnet {
			t.Errorf("hits from two subnets: %s and %s", subnet, p)
		}
		subnet = p
	}
	owned := func(a netip.Addr) bool {
		a = a.Unmap()
		return a.IsLoopback() || a == metadataIP || (subnet.IsValid() && subnet.Contains(a)) ||
			slices.Contains(harnessOutside, a) || slices.Contains(harnessCloudMetadata, a) ||
			slices.Contains(harnessOwned6, a) || harnessPrefix6.Contains(a)
	}
	for _, h := range hits {
		// An ICMP hit names a bare address; the rest name address:port.
		a, err := parseDest(h.Local)
		if err != nil || !owned(a) {
			t.Errorf("a %s hit arrived on %q, not a harness address", h.Service, h.Local)
		}
	}
	checked := 0
	for _, res := range rec.Results {
		for _, it := range res.Evidence {
			var addrs []string
			switch {
			case it.Source == evidence.SourceTracer && it.Kind == "tracer-connect":
				addrs = append(addrs, it.Data["address"])
			case it.Source == evidence.SourceProbe:
				for _, k := range []string{"addr", "server", "resolver", "redirector"} {
					if v := it.Data[k]; v != "" {
						addrs = append(addrs, v)
					}
				}
			}
			for _, s := range addrs {
				checked++
				a, err := parseDest(s)
				if err != nil {
					t.Errorf("%s: %s/%s names destination %q, which does not parse: %v", res.Probe, it.Source, it.Kind, s, err)
					continue
				}
				if !owned(a) {
					t.Errorf("%s: %s/%s reached %s, not a harness address", res.Probe, it.Source, it.Kind, s)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no destination found in the results to check")
	}
	// IPv6 too: both IPv6 probes ran and reached only harness IPv6
	// addresses (checked above with the rest).
	v6 := 0
	for _, h := range hits {
		if a, err := parseDest(h.Local); err == nil && slices.Contains(harnessOwned6, a) {
			v6++
		}
	}
	if v6 == 0 {
		t.Error("no canary hit on a harness IPv6 address: the IPv6 probes reached nothing")
	}
	if f := ipv6Forwarding(t); f != "0" {
		t.Errorf("net.ipv6.conf.all.forwarding = %s after the run, want 0", f)
	}
	t.Logf("%d canary hits (%d over IPv6) and %d reported destinations, all on harness addresses (subnet %s, %s)", len(hits), v6, checked, subnet, harnessPrefix6)
}

// parseDest reads "ip", "ip:port" or "[ip]:port".
func parseDest(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), nil
	}
	return netip.ParseAddr(strings.Trim(s, "[]"))
}

type hit struct {
	Service string `json:"service"`
	Remote  string `json:"remote"`
	Local   string `json:"local"`
}

// canaryHits reads the canary-hit events of the run's evidence log.
func canaryHits(t *testing.T, out string) []hit {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "evidence.jsonl"))
	if err != nil {
		t.Fatalf("evidence.jsonl: %v", err)
	}
	defer f.Close()
	var hits []hit
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "canary-hit" {
			continue
		}
		var h hit
		if err := json.Unmarshal(ev.Data, &h); err != nil {
			t.Fatalf("canary-hit event: %v", err)
		}
		hits = append(hits, h)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading evidence.jsonl: %v", err)
	}
	return hits
}
