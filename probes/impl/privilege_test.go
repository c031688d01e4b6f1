package impl

import (
	"strings"
	"testing"
)

func TestDangerousIn(t *testing.T) {
	tests := []struct {
		name, mask string
		want       string
	}{
		{"none", "0000000000000000", ""},
		{"harmless only", "0000000000000431", ""}, // CHOWN FSETID KILL NET_BIND_SERVICE
		{"docker default", "00000000a80425fb", "DAC_OVERRIDE FOWNER SETGID SETUID SETPCAP NET_RAW MKNOD SETFCAP"},
		{"sys_admin", "0000000000200000", "SYS_ADMIN"},
		{"bit past the known list", "0000020000000000", "CAP_41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dangerousIn(tt.mask)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("dangerousIn(%s) = %v, want %s", tt.mask, got, tt.want)
			}
		})
	}
	if _, err := dangerousIn("zz"); err == nil {
		t.Error("a bad mask parsed without error")
	}
}

func TestCapNamesMatchDangerousSet(t *testing.T) {
	known := map[string]bool{}
	for _, n := range capNames {
		known[n] = true
	}
	for n := range dangerousCapSet {
		if !known[n] {
			t.Errorf("dangerous capability %s is not a capability name", n)
		}
	}
}

func TestParseStatus(t *testing.T) {
	st := parseStatus(strings.NewReader("Name:\tx\nCapEff:\t00000000a80425fb\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n"))
	for k, want := range map[string]string{"CapEff": "00000000a80425fb", "NoNewPrivs": "1", "Seccomp": "2", "Seccomp_filters": "1"} {
		if st[k] != want {
			t.Errorf("status %s = %q, want %q", k, st[k], want)
		}
	}
}
