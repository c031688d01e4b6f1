package netharness

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
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
	rules := inputRules("scbr-00000000", "169.254.150.1")
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
