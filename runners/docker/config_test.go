package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

func hardenedCfg() targets.Docker {
	return targets.Docker{
		Runtime: "runsc", User: "65534:65534", CapDrop: []string{"ALL"}, Seccomp: "default",
		NoNewPrivileges: true, ReadOnlyRootfs: true,
		Tmpfs:     []targets.Tmpfs{{Path: "/tmp", Size: "16Mi"}, {Path: "/work", Size: "1M", Exec: true, NrInodes: 512}},
		ShmSize:   "8Mi",
		Ulimits:   []targets.Ulimit{{Name: "nofile", Soft: 256, Hard: 512}, {Name: "cpu", Soft: 5, Hard: 6}},
		PidsLimit: 64, Memory: "128Mi", CPUs: 0.5, Network: "none",
		Mounts: []targets.Mount{{Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"}},
		Env:    map[string]string{"B": "2", "A": "1"},
	}
}

func TestHostConfig(t *testing.T) {
	s, err := newSettings(hardenedCfg())
	if err != nil {
		t.Fatal(err)
	}
	spec := runners.SandboxSpec{ProbeDir: "/run/probes", DNS: []string{"127.0.0.11"}, Env: map[string]string{"A": "harness"}}
	hc, err := s.hostConfig(spec, "none")
	if err != nil {
		t.Fatal(err)
	}
	if hc.Runtime != "runsc" || hc.NetworkMode != "none" || !hc.ReadonlyRootfs || hc.Privileged {
		t.Errorf("runtime %q network %q read-only %v privileged %v", hc.Runtime, hc.NetworkMode, hc.ReadonlyRootfs, hc.Privileged)
	}
	if hc.Memory != 128<<20 || hc.MemorySwap != hc.Memory {
		t.Errorf("memory %d swap %d, want both %d", hc.Memory, hc.MemorySwap, 128<<20)
	}
	if hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Errorf("nano cpus %d pids %v", hc.NanoCPUs, hc.PidsLimit)
	}
	if !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("security opts %v", hc.SecurityOpt)
	}
	if got := hc.Tmpfs["/tmp"]; got != "rw,noexec,nosuid,nodev,size=16777216" {
		t.Errorf("tmpfs /tmp options %q", got)
	}
	if got := hc.Tmpfs["/work"]; !strings.HasPrefix(got, "rw,exec,") || !strings.HasSuffix(got, ",nr_inodes=512") {
		t.Errorf("tmpfs /work options %q, want exec and nr_inodes=512", got)
	}
	if hc.ShmSize != 8<<20 {
		t.Errorf("shm size %d, want %d", hc.ShmSize, 8<<20)
	}
	if len(hc.Ulimits) != 2 || hc.Ulimits[0].Name != "nofile" || hc.Ulimits[0].Soft != 256 || hc.Ulimits[0].Hard != 512 ||
		hc.Ulimits[1].Name != "cpu" || hc.Ulimits[1].Soft != 5 || hc.Ulimits[1].Hard != 6 {
		t.Errorf("ulimits %+v", hc.Ulimits)
	}
	if len(hc.Mounts) != 2 || hc.Mounts[0].Target != runners.ProbeMount || !hc.Mounts[0].ReadOnly ||
		hc.Mounts[0].Source != "/run/probes" || hc.Mounts[1].Source != "/var/run/docker.sock" {
		t.Errorf("mounts %+v", hc.Mounts)
	}
	if len(hc.DNS) != 1 || hc.DNS[0].String() != "127.0.0.11" {
		t.Errorf("dns %v", hc.DNS)
	}
	if hc.MaskedPaths != nil || hc.ReadonlyPaths != nil {
		t.Errorf("masked %v read-only %v: the engine's defaults must stay", hc.MaskedPaths, hc.ReadonlyPaths)
	}
	if hc.LogConfig.Config["max-size"] == "" {
		t.Errorf("container logs are not bounded: %+v", hc.LogConfig)
	}
	env, err := s.env(spec)
	if err != nil || !slices.Equal(env, []string{"A=harness", "B=2"}) {
		t.Errorf("env %v (%v), want the harness's value on top, sorted", env, err)
	}
	if _, err := s.hostConfig(runners.SandboxSpec{DNS: []string{"resolver.example"}}, "none"); err == nil {
		t.Error("a DNS name instead of an address was accepted")
	}
}

func TestSecurityOpts(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(profile, []byte("{\n  \"defaultAction\": \"SCMP_ACT_ERRNO\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  targets.Docker
		want []string
	}{
		{targets.Docker{Seccomp: "unconfined", AppArmor: "unconfined", SystemPaths: "unconfined"},
			[]string{"seccomp=unconfined", "apparmor=unconfined"}},
		{targets.Docker{Seccomp: profile, AppArmor: "default", SystemPaths: "masked"},
			[]string{`seccomp={"defaultAction":"SCMP_ACT_ERRNO"}`}},
		{targets.Docker{}, nil},
	} {
		tc.cfg.Runtime, tc.cfg.Network = "runc", "none"
		s, err := newSettings(tc.cfg)
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if !slices.Equal(s.securityOpt, tc.want) {
			t.Errorf("%+v: security opts %q, want %q", tc.cfg, s.securityOpt, tc.want)
		}
		hc, err := s.hostConfig(runners.SandboxSpec{}, "none")
		if err != nil {
			t.Fatal(err)
		}
		if unmasked := hc.MaskedPaths != nil && len(hc.MaskedPaths) == 0 && hc.ReadonlyPaths != nil; unmasked != (tc.cfg.SystemPaths == "unconfined") {
			t.Errorf("%+v: masked paths %v, read-only paths %v", tc.cfg, hc.MaskedPaths, hc.ReadonlyPaths)
		}
	}
}

func TestNewRefusesNonsense(t *testing.T) {
	notJSON := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*targets.Docker){
		"unknown runtime":    func(d *targets.Docker) { d.Runtime = "kata" },
		"relative seccomp":   func(d *targets.Docker) { d.Seccomp = "profiles/x.json" },
		"seccomp not json":   func(d *targets.Docker) { d.Seccomp = notJSON },
		"missing seccomp":    func(d *targets.Docker) { d.Seccomp = "/nonexistent/profile.json" },
		"apparmor typo":      func(d *targets.Docker) { d.AppArmor = "unconfinded" },
		"system paths typo":  func(d *targets.Docker) { d.SystemPaths = "open" },
		"CAP_ prefix":        func(d *targets.Docker) { d.CapAdd = []string{"CAP_SYS_ADMIN"} },
		"cap_add ALL":        func(d *targets.Docker) { d.CapAdd = []string{"ALL"} },
		"tmpfs relative":     func(d *targets.Docker) { d.Tmpfs = []targets.Tmpfs{{Path: "tmp", Size: "1M"}} },
		"tmpfs on probe":     func(d *targets.Docker) { d.Tmpfs = []targets.Tmpfs{{Path: "/.sandcheck", Size: "1M"}} },
		"tmpfs twice":        func(d *targets.Docker) { d.Tmpfs = append(d.Tmpfs, d.Tmpfs[0]) },
		"tmpfs size":         func(d *targets.Docker) { d.Tmpfs = []targets.Tmpfs{{Path: "/t", Size: "lots"}} },
		"negative pids":      func(d *targets.Docker) { d.PidsLimit = -1 },
		"negative nr_inodes": func(d *targets.Docker) { d.Tmpfs[0].NrInodes = -1 },
		"shm size words":     func(d *targets.Docker) { d.ShmSize = "big" },
		"unknown ulimit":     func(d *targets.Docker) { d.Ulimits = []targets.Ulimit{{Name: "files", Soft: 1, Hard: 1}} },
		"ulimit twice":       func(d *targets.Docker) { d.Ulimits = append(d.Ulimits, d.Ulimits[0]) },
		"ulimit soft > hard": func(d *targets.Docker) { d.Ulimits = []targets.Ulimit{{Name: "cpu", Soft: 9, Hard: 1}} },
		"tiny memory":        func(d *targets.Docker) { d.Memory = "1Mi" },
		"memory words":       func(d *targets.Docker) { d.Memory = "a lot" },
		"negative cpus":      func(d *targets.Docker) { d.CPUs = -1 },
		"no network":         func(d *targets.Docker) { d.Network = "" },
		"container network":  func(d *targets.Docker) { d.Network = "container:abc" },
		"relative mount":     func(d *targets.Docker) { d.Mounts = []targets.Mount{{Source: "share", Target: "/share"}} },
		"mount on root":      func(d *targets.Docker) { d.Mounts = []targets.Mount{{Source: "/srv", Target: "/"}} },
		"mount on probe dir": func(d *targets.Docker) { d.Mounts = []targets.Mount{{Source: "/srv", Target: "/.sandcheck/x"}} },
		"env name":           func(d *targets.Docker) { d.Env = map[string]string{"A=B": "c"} },
	} {
		d := hardenedCfg()
		mutate(&d)
		if _, err := New(d, testImage); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(hardenedCfg(), ""); err == nil {
		t.Error("empty image accepted")
	}
	if _, err := New(hardenedCfg(), testImage); err != nil {
		t.Errorf("the hardened configuration was refused: %v", err)
	}
}

func TestStartRefusesBadSpecs(t *testing.T) {
	probes := t.TempDir()
	if err := os.WriteFile(filepath.Join(probes, runners.ProbeBinary), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	harness := hardenedCfg()
	harness.Network = "harness"
	for name, tc := range map[string]struct {
		cfg  targets.Docker
		spec runners.SandboxSpec
		want string
	}{
		"harness network unnamed": {harness, runners.SandboxSpec{ProbeDir: probes}, "harness gave none"},
		"no probe":                {hardenedCfg(), runners.SandboxSpec{ProbeDir: t.TempDir()}, "probe binary"},
		"relative probe dir":      {hardenedCfg(), runners.SandboxSpec{ProbeDir: "probes"}, "not an absolute path"},
		"bad env":                 {hardenedCfg(), runners.SandboxSpec{ProbeDir: probes, Env: map[string]string{"": "x"}}, "env name"},
	} {
		r, err := New(tc.cfg, testImage)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Start(context.Background(), tc.spec)
		if !errors.Is(err, runners.ErrStart) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrStart mentioning %q", name, err, tc.want)
		}
	}
}

func TestContainerName(t *testing.T) {
	a, b := containerName("probe: host/mounts #1"), containerName("probe: host/mounts #1")
	if a == b {
		t.Errorf("two names alike: %s", a)
	}
	if !strings.HasPrefix(a, "sandcheck-probe--host-mounts--1-") {
		t.Errorf("name %q", a)
	}
	if long := containerName(strings.Repeat("x", 500)); len(long) > 64 {
		t.Errorf("name of %d characters", len(long))
	}
	if empty := containerName("///"); !strings.HasPrefix(empty, "sandcheck-") || strings.Contains(empty, "--") {
		t.Errorf("name %q for a name without usable characters", empty)
	}
}

func TestCapped(t *testing.T) {
	c := newCapped(5)
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a short write would stop the copy", s, n, err)
		}
	}
	if string(c.buf) != "abcde" || !c.over {
		t.Errorf("kept %q, over %v", c.buf, c.over)
	}
}

func TestRuntimeView(t *testing.T) {
	pids := int64(64)
	c := container.InspectResponse{
		Image:  "sha256:abc",
		Config: &container.Config{User: "65534", Env: []string{"SECRET=hunter2", "PATH=/bin"}},
		HostConfig: &container.HostConfig{
			Runtime: "runc", CapAdd: []string{"CAP_SYS_ADMIN"}, CapDrop: []string{"ALL"},
			SecurityOpt:    []string{`seccomp={"defaultAction":"SCMP_ACT_ALLOW"}`, "no-new-privileges:true"},
			ReadonlyRootfs: true, NetworkMode: "none", MaskedPaths: []string{"/proc/kcore"},
			Tmpfs:     map[string]string{"/tmp": "rw,noexec,size=1"},
			Resources: container.Resources{PidsLimit: &pids, Memory: 1 << 27, NanoCPUs: 1e9},
		},
		Mounts: []container.MountPoint{{Type: "bind", Source: "/host", Destination: "/.sandcheck", RW: false}},
	}
	v := runtimeView(c, "img:dev")
	if v.Seccomp != "custom" || !v.NoNewPrivileges || v.PidsLimit != 64 || v.User != "65534" || v.ImageDigest != "sha256:abc" || v.Image != "img:dev" {
		t.Errorf("view %+v", v)
	}
	if !slices.Equal(v.CapAdd, []string{"SYS_ADMIN"}) || !slices.Equal(v.Env, []string{"PATH", "SECRET"}) {
		t.Errorf("caps %v env %v", v.CapAdd, v.Env)
	}
	if strings.Contains(strings.Join(v.SecurityOpt, " "), "SCMP_ACT_ALLOW") || !strings.HasPrefix(v.SecurityOpt[0], "seccomp=custom:sha256:") {
		t.Errorf("security opts %q carry the profile text", v.SecurityOpt)
	}
	if len(v.Mounts) != 2 || v.Mounts[0].Destination != "/.sandcheck" || !v.Mounts[0].ReadOnly || v.Mounts[1].Type != "tmpfs" {
		t.Errorf("mounts %+v", v.Mounts)
	}
	c.HostConfig.Privileged = true
	c.HostConfig.SecurityOpt = nil
	if v := runtimeView(c, "img:dev"); v.Seccomp != "unconfined" {
		t.Errorf("privileged container reported with seccomp %q", v.Seccomp)
	}
}
