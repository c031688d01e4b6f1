package impl

import (
	"testing"
)

func TestHostBacked(t *testing.T) {
	ms := []mount{
		{Root: "/", Target: "/", FSType: "overlay"},
		{Root: "/", Target: "/tmp", FSType: "tmpfs"},
		{Root: "/sandcheck-run-1/hostshare", Target: "/hostshare", FSType: "ext4"},
		{Root: "/tmp/sandcheck-run-1/share", Target: "/share", FSType: "tmpfs"},
		{Root: "/", Target: "/data", FSType: "xfs"},
	}
	for place, want := range map[string]bool{
		"/root": false, "/tmp": false, "/tmp/x": false,
		"/hostshare": true, "/share": true, "/data": true,
	} {
		if got, desc := hostBacked(place, ms); got != want {
			t.Errorf("hostBacked(%s) = %t (%s), want %t", place, got, desc, want)
		}
	}
	if got, _ := hostBacked("/x", nil); got {
		t.Error("no mount at all: not host-backed")
	}
}

func TestTeardownBridgeFitsALinkName(t *testing.T) {
	for _, tok := range []string{"sc0123456789ab", "sc01", "sc" + "0123456789abcdef0123"} {
		b := TeardownBridge(tok)
		if len(b) > 15 || len(b) < 5 {
			t.Errorf("TeardownBridge(%s) = %q: a link name has 1 to 15 characters", tok, b)
		}
	}
	if b := TeardownBridge("sc0123456789ab"); b != "sctd23456789ab" {
		t.Errorf("bridge %q", b)
	}
}
