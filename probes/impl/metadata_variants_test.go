package impl

import (
	"net/netip"
	"testing"
)

func TestIPFormsDecodeToTheAddress(t *testing.T) {
	ip := netip.MustParseAddr("169.254.169.254")
	want := map[string]string{"decimal": "2852039166", "hex": "0xa9fea9fe", "octal": "0251.0376.0251.0376",
		"dotted-hex": "0xa9.0xfe.0xa9.0xfe", "ipv4-mapped": "[::ffff:169.254.169.254]"}
	for _, f := range ipForms(ip) {
		if f.host != want[f.name] {
			t.Errorf("%s: %q, want %q", f.name, f.host, want[f.name])
		}
		if got, ok := parseIPForm(f.host); !ok || got != ip {
			t.Errorf("%s %q decodes to %v (ok %v)", f.name, f.host, got, ok)
		}
	}
	for _, bad := range []string{"", "1.2.3", "256.1.1.1", "0x1ffffffff", "[::1]", "a.b.c.d", "1.2.3.4.5"} {
		if got, ok := parseIPForm(bad); ok {
			t.Errorf("%q decoded to %v", bad, got)
		}
	}
}
