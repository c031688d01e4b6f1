package netharness

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/canary"
)

func TestBoundTo(t *testing.T) {
	// 198.51.100.10:443 listening, 198.51.100.53:53 in state 07 (a bound
	// UDP socket), 127.0.0.1:80 listening.
	table := `  sl  local_address rem_address   st
   0: 0A6433C6:01BB 00000000:0000 0A 00000000:00000000
   1: 356433C6:0035 00000000:0000 07 00000000:00000000
   2: 0100007F:0050 00000000:0000 0A 00000000:00000000
`
	got, err := boundTo(strings.NewReader(table), hostAddrs(), true)
	if err != nil || !slices.Equal(got, []netip.AddrPort{netip.MustParseAddrPort("198.51.100.10:443")}) {
		t.Errorf("listening: %v (err %v)", got, err)
	}
	got, _ = boundTo(strings.NewReader(table), hostAddrs(), false)
	if len(got) != 2 {
		t.Errorf("bound: %v, want the outside and resolver sockets", got)
	}
}

func TestInputRulesAcceptOnlyOwnAddresses(t *testing.T) {
	rules, err := inputRules("scbr-00000000", "169.254.150.1", "open")
	if err != nil {
		t.Fatal(err)
	}
	last := rules[len(rules)-1]
	if last.String() != "INPUT -i scbr-00000000 -j DROP" {
		t.Errorf("last rule %s, want the catch-all drop", last)
	}
	for _, r := range rules[:len(rules)-1] {
		dst := r.spec[slices.Index(r.spec, "-d")+1]
		p := netip.MustParsePrefix(dst)
		if p.Bits() != 32 || !(p.Addr() == netip.MustParseAddr("169.254.150.1") || slices.Contains(hostAddrs(), p.Addr())) {
			t.Errorf("rule %s accepts %s, not a harness address", r, dst)
		}
		// Never this machine's own network or resolver.
		for _, banned := range []string{"192.0.2.0/24", "10.255.255.53/32", "172.17.0.0/16"} {
			if netip.MustParsePrefix(banned).Overlaps(p) {
				t.Errorf("rule %s touches %s", r, banned)
			}
		}
	}
}

// TestInputRulesPerEgressProfile: mirror-only accepts the package mirror
// and the gateway's port 53 (a filtering resolver there) and nothing else,
// none accepts only that resolver, and both end in rejects and the catch-all drop; a profile the
// harness has no canary for is refused.
func TestInputRulesPerEgressProfile(t *testing.T) {
	accepts := func(rules []rule) []string {
		var out []string
		for _, r := range rules {
			if r.spec[len(r.spec)-1] != "ACCEPT" {
				continue
			}
			a := r.spec[slices.Index(r.spec, "-d")+1]
			if i := slices.Index(r.spec, "-p"); i >= 0 {
				a += " " + r.spec[i+1] + " " + r.spec[slices.Index(r.spec, "--dport")+1]
			}
			out = append(out, a)
		}
		return out
	}
	gw := []string{"169.254.150.1/32 udp 53", "169.254.150.1/32 tcp 53"}
	for egress, want := range map[string][]string{"mirror-only": append([]string{"198.51.100.80/32"}, gw...), "none": gw} {
		rules, err := inputRules("scbr-00000000", "169.254.150.1", egress)
		if err != nil {
			t.Fatalf("%s: %v", egress, err)
		}
		if got := accepts(rules); !slices.Equal(got, want) {
			t.Errorf("%s accepts %v, want %v", egress, got, want)
		}
		var tail []string
		for _, r := range rules[len(rules)-3:] {
			tail = append(tail, r.String())
		}
		wantTail := []string{
			"INPUT -i scbr-00000000 -p tcp -j REJECT --reject-with tcp-reset",
			"INPUT -i scbr-00000000 -p udp -j REJECT --reject-with icmp-port-unreachable",
			"INPUT -i scbr-00000000 -j DROP",
		}
		if !slices.Equal(tail, wantTail) {
			t.Errorf("%s ends with %v, want %v", egress, tail, wantTail)
		}
	}
	rules, err := inputRules("scbr-00000000", "169.254.150.1", "proxy-only")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := accepts(rules), append(gw, "169.254.150.1/32 tcp 3128"); !slices.Equal(got, want) {
		t.Errorf("proxy-only accepts %v, want %v", got, want)
	}
	rules, err = inputRules("scbr-00000000", "169.254.150.1", "broker-only")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := accepts(rules), append(gw, "169.254.150.1/32 tcp 8090"); !slices.Equal(got, want) {
		t.Errorf("broker-only accepts %v, want %v", got, want)
	}
	for _, egress := range []string{"bogus"} {
		if _, err := inputRules("scbr-00000000", "169.254.150.1", egress); err == nil {
			t.Errorf("%s: want an error (no canary stands for it)", egress)
		}
	}
}

// TestCloudMetadataAddresses: the open profile accepts the ECS and Alibaba
// canaries' addresses, and a host where they already mean something (a
// CGNAT overlay such as 100.64.0.0/10, a 169.254.170.0/24 route) is refused.
func TestCloudMetadataAddresses(t *testing.T) {
	rules, err := inputRules("scbr-00000000", "169.254.150.1", "open")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"169.254.170.2/32", "100.100.100.200/32"} {
		if !slices.ContainsFunc(rules, func(r rule) bool { return slices.Contains(r.spec, a) && r.spec[len(r.spec)-1] == "ACCEPT" }) {
			t.Errorf("open INPUT rules do not accept %s", a)
		}
	}
	for _, used := range []string{"100.64.0.0/10", "169.254.170.0/24"} {
		if err := checkOutsideFree([]netip.Prefix{netip.MustParsePrefix(used)}); err == nil {
			t.Errorf("a host using %s was accepted", used)
		}
	}
	if err := checkOutsideFree([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("172.17.0.0/16")}); err != nil {
		t.Errorf("this machine's networks refused: %v", err)
	}
}

// TestHarnessServesEveryDeclaredCanary: the harness network serves every
// canary service declared in canary.Services, and nothing undeclared, on
// addresses it owns, under every egress profile (`canary serve` offers
// the same table: cmd/sandcheck TestCanaryServeOffersEveryService).
func TestHarnessServesEveryDeclaredCanary(t *testing.T) {
	for _, egress := range []string{"open", "none", "mirror-only"} {
		n := &Network{plan: planFor(150), egress: egress, v6: true}
		addrs := n.canaryAddrs()
		got := slices.Sorted(maps.Keys(addrs))
		if want := slices.Sorted(slices.Values(canary.ServiceNames())); !slices.Equal(got, want) {
			t.Errorf("%s: the harness serves %v, the declared canaries are %v", egress, got, want)
		}
		owned := n.Owned()
		for name, list := range addrs {
			if len(list) == 0 {
				t.Errorf("%s: canary %s has no harness address", egress, name)
			}
			for _, a := range list {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					ap, perr := netip.ParseAddrPort(a)
					if perr != nil {
						t.Fatalf("%s: canary %s address %q: %v", egress, name, a, perr)
					}
					ip = ap.Addr()
				}
				if !slices.Contains(owned, ip) {
					t.Errorf("%s: canary %s on %s, not an address the harness owns", egress, name, a)
				}
			}
		}
		resolver := net.JoinHostPort("169.254.150.1", "53")
		if slices.Contains(addrs["dns"], resolver) != (egress == "open") {
			t.Errorf("%s: the DNS canary on the sandbox's resolver %s: %v, want it there only under open egress", egress, resolver, addrs["dns"])
		}
	}
}
