package targets

import (
	"strings"
	"testing"
)

const devHead = "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n"

func TestPIDAndDevicesValidated(t *testing.T) {
	cases := map[string]string{
		"pid container":       "  pid: container:abc\n",
		"relative device":     "  devices:\n    - {source: dev/kmsg, target: /dev/kmsg}\n",
		"target outside /dev": "  devices:\n    - {source: /dev/kmsg, target: /etc/kmsg}\n",
		"bad permissions":     "  devices:\n    - {source: /dev/kmsg, target: /dev/kmsg, permissions: rwx}\n",
		"unclean target":      "  devices:\n    - {source: /dev/kmsg, target: /dev/../etc/x}\n",
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse("t.yaml", []byte(devHead+extra)); err == nil {
				t.Fatalf("want an error for %q", extra)
			}
		})
	}
}

func TestResolveDevicesBlockCanary(t *testing.T) {
	tg, err := Parse("t.yaml", []byte(devHead+"  pid: host\n  devices:\n    - {source: /dev/kmsg, target: /dev/kmsg}\n    - {source: \"${SANDCHECK_BLOCK_CANARY}\", target: /dev/sandcheck-block, permissions: r}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.Docker.PID != "host" || !tg.UsesBlockCanary() {
		t.Fatalf("pid %q, uses block canary %t", tg.Docker.PID, tg.UsesBlockCanary())
	}
	if _, err := tg.ResolveDevices(""); err == nil || !strings.Contains(err.Error(), "block canary") {
		t.Fatalf("resolving without a canary: want an error naming it, got %v", err)
	}
	ds, err := tg.ResolveDevices("/dev/loop5")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Permissions != "r" || ds[1].Source != "/dev/loop5" {
		t.Fatalf("resolved devices %+v", ds)
	}
}
