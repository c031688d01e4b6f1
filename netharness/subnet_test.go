package netharness

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPickSubnet(t *testing.T) {
	pp := netip.MustParsePrefix
	cases := []struct {
		name  string
		used  []netip.Prefix
		start int
		want  string
	}{
		{"first free", nil, 100, "169.254.100.0/24"},
		{"skips a used /24", []netip.Prefix{pp("169.254.100.0/24")}, 100, "169.254.101.0/24"},
		{"skips a smaller route inside", []netip.Prefix{pp("169.254.100.128/25")}, 100, "169.254.101.0/24"},
		{"skips a wider network", []netip.Prefix{pp("169.254.96.0/21")}, 100, "169.254.104.0/24"},
		{"skips the metadata /24 and the ECS /24", nil, 169, "169.254.171.0/24"},
		{"skips the ECS /24", nil, 170, "169.254.171.0/24"},
		{"wraps around", []netip.Prefix{pp("169.254.199.0/24")}, 199, "169.254.100.0/24"},
		{"ignores other networks", []netip.Prefix{pp("172.17.0.0/16"), pp("192.0.2.0/24")}, 150, "169.254.150.0/24"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pickSubnet(tc.used, tc.start)
			if err != nil {
				t.Fatal(err)
			}
			if p.Subnet.String() != tc.want {
				t.Fatalf("picked %s, want %s", p.Subnet, tc.want)
			}
			base := p.Subnet.Addr().As4()
			if p.IPRange != netip.PrefixFrom(p.Subnet.Addr(), 25) || p.Gateway != netip.AddrFrom4([4]byte{169, 254, base[2], 1}) {
				t.Errorf("plan %+v: want the lower /25 as range and .1 as gateway", p)
			}
		})
	}
}

func TestPickSubnetExhausted(t *testing.T) {
	if _, err := pickSubnet([]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}, 100); err == nil {
		t.Fatal("picked a subnet inside a used 169.254.0.0/16")
	}
}

func TestShortID(t *testing.T) {
	for in, want := range map[string]string{
		"01JABCDEF0123456789": "01jabcdef012",
		"run 1/../x":          "run-1-..-x",
		"///":                 "run",
		"abc":                 "abc",
	} {
		if got := shortID(in); got != want {
			t.Errorf("shortID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestListensOn(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: FEA9FEA9:0050 0200FEA9:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
`
	if got, _ := listensOn(strings.NewReader(table)); got {
		t.Error("an established connection on the metadata address counted as a listener")
	}
	listening := table + "   2: FEA9FEA9:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0\n"
	if got, _ := listensOn(strings.NewReader(listening)); !got {
		t.Error("missed a listener on 169.254.169.254:80")
	}
}

func TestRuleMatching(t *testing.T) {
	for line, want := range map[string]bool{
		"-A DOCKER-USER -i scbr-0123abcd -j DROP":                        true,
		"-A INPUT -d 169.254.169.254/32 -i scbr-0123abcd -j ACCEPT":      true,
		"-A DOCKER-USER -o scbr-0123abcd -j DROP":                        true,
		"-A DOCKER-USER -i docker0 -j DROP":                              false,
		"-A DOCKER-USER -i scbr-0123abcdef -j DROP":                      false,
		"-A DOCKER-USER -j RETURN":                                       false,
		"-A FORWARD -m comment --comment scbr-0123abcd -j ACCEPT":        false,
		"-A INPUT -i scbr-0123abcd":                                      true,
		"-A DOCKER-USER -s 10.0.0.0/8 -i scbr-ffffffff -p tcp -j REJECT": true,
	} {
		if got := ruleMentionsBridge.MatchString(line); got != want {
			t.Errorf("%q: matched %v, want %v", line, got, want)
		}
	}
}

func TestInputRulesAcceptBeforeDrop(t *testing.T) {
	r, err := inputRules("scbr-00000000", "169.254.120.1", "")
	if err != nil {
		t.Fatal(err)
	}
	last := r[len(r)-1].spec
	if last[len(last)-1] != "DROP" || strings.Contains(strings.Join(last, " "), "-d") {
		t.Fatalf("last INPUT rule %v should be the catch-all drop", last)
	}
}
