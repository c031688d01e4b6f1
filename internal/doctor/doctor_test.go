package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fakeEngine struct {
	info     engineInfo
	infoErr  error
	imageID  string
	labels   map[string]string
	imageErr error
}

func (f fakeEngine) Info(context.Context) (engineInfo, error) { return f.info, f.infoErr }

func (f fakeEngine) Image(context.Context, string) (string, map[string]string, error) {
	return f.imageID, f.labels, f.imageErr
}

func goodInfo() engineInfo {
	return engineInfo{
		Host:            "unix:///var/run/docker.sock",
		ServerVersion:   "20.10.24",
		Driver:          "overlay2",
		CgroupVersion:   "1",
		SecurityOptions: []string{"name=seccomp,profile=default"},
		Runtimes: map[string]runtimeInfo{
			"runc":  {Path: "runc"},
			"runsc": {Path: "/usr/bin/runsc", Args: []string{"--network=host", "--oci-seccomp"}},
		},
	}
}

const v1Mounts = `tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`

// fakeRoot builds a machine root under t.TempDir with the given mount table,
// optionally a mounted tracefs with the raw_syscalls tracepoints, and any
// extra files.
func fakeRoot(t *testing.T, mounts string, tracefs bool, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/mounts", mounts)
	if err := os.MkdirAll(filepath.Join(root, "sys/kernel/tracing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if tracefs {
		write("sys/kernel/tracing/events/raw_syscalls/sys_enter/id", "21\n")
		write("sys/kernel/btf/vmlinux", "")
	}
	for rel, content := range files {
		write(rel, content)
	}
	return root
}

func healthy(t *testing.T) system {
	return system{
		engine:      fakeEngine{info: goodInfo(), imageID: "sha256:fa7826359ebc0123456789", labels: map[string]string{"dev.sandcheck.inputs": "sha256:1bd48b7d7e80aaaa"}},
		lookPath:    func(string) (string, error) { return "/usr/bin/bwrap", nil },
		euid:        0,
		root:        fakeRoot(t, v1Mounts, true, nil),
		chainExists: func(string, string) (bool, error) { return true, nil },
	}
}

func byName(checks []Check) map[string]Check {
	m := make(map[string]Check, len(checks))
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

// wantNames is the fixed order of the checks; the CLI and docs rely on it.
var wantNames = []string{
	"docker-engine", "runtime-runc", "runtime-runsc", "bubblewrap", "root",
	"bpf-tracepoints", "cgroup", "docker-user-chain", "runner-image",
}

func TestHealthyMachineIsAllOK(t *testing.T) {
	checks := healthy(t).run(context.Background())
	if len(checks) != len(wantNames) {
		t.Fatalf("got %d checks, want %d: %+v", len(checks), len(wantNames), checks)
	}
	for i, c := range checks {
		if c.Name != wantNames[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, wantNames[i])
		}
		if c.Status != OK || c.Fix != "" {
			t.Errorf("%s: status %q fix %q (detail %q), want ok and no fix", c.Name, c.Status, c.Fix, c.Detail)
		}
	}
	m := byName(checks)
	for name, want := range map[string]string{
		"docker-engine":   "Docker 20.10.24 at unix:///var/run/docker.sock (storage overlay2, cgroup v1, seccomp)",
		"runtime-runsc":   "/usr/bin/runsc --network=host --oci-seccomp",
		"cgroup":          "v1 (hybrid: cgroup2 at /sys/fs/cgroup/unified)",
		"bpf-tracepoints": "raw_syscalls tracepoints in /sys/kernel/tracing",
		"runner-image":    "sandcheck/runner:dev sha256:fa7826359ebc (inputs sha256:1bd48b7d7e80)",
	} {
		if got := m[name].Detail; got != want {
			t.Errorf("%s detail = %q, want %q", name, got, want)
		}
	}
}

func TestEngineUnreachable(t *testing.T) {
	s := healthy(t)
	s.engine = fakeEngine{infoErr: errors.New("Cannot connect to the Docker daemon\nat unix:///var/run/docker.sock")}
	m := byName(s.run(context.Background()))

	if c := m["docker-engine"]; c.Status != Missing || !strings.Contains(c.Fix, "make setup") || strings.Contains(c.Detail, "\n") {
		t.Errorf("docker-engine = %+v, want missing, a one-line detail and a fix naming make setup", c)
	}
	// Without the engine nothing can be said about its runtimes or images:
	// that is "could not tell", not "missing".
	for _, name := range []string{"runtime-runc", "runtime-runsc", "runner-image"} {
		if c := m[name]; c.Status != Warn || !strings.HasPrefix(c.Detail, "could not tell") || c.Fix == "" {
			t.Errorf("%s = %+v, want warn / could not tell, with a fix", name, c)
		}
	}
}

func TestEngineSocketDenied(t *testing.T) {
	s := healthy(t)
	s.engine = fakeEngine{infoErr: errors.New("permission denied while trying to connect to the docker API at unix:///var/run/docker.sock")}
	if c := byName(s.run(context.Background()))["docker-engine"]; c.Status != Missing || !strings.Contains(c.Fix, "root") {
		t.Errorf("docker-engine = %+v, want missing with a fix about root or the docker group", c)
	}
}

func TestNoClient(t *testing.T) {
	s := healthy(t)
	s.engine, s.engineErr = nil, errors.New("creating a Docker client: bad DOCKER_HOST")
	if c := byName(s.run(context.Background()))["docker-engine"]; c.Status != Missing || !strings.Contains(c.Detail, "bad DOCKER_HOST") {
		t.Errorf("docker-engine = %+v, want missing with the client error", c)
	}
}

func TestRuntimes(t *testing.T) {
	tests := []struct {
		name       string
		runtimes   map[string]runtimeInfo
		check      string
		wantStatus Status
		wantFix    string
	}{
		{"runsc absent", map[string]runtimeInfo{"runc": {Path: "runc"}}, "runtime-runsc", Missing, "daemon.json"},
		{"runc absent", map[string]runtimeInfo{"runsc": {Path: "/usr/bin/runsc", Args: runscArgs}}, "runtime-runc", Missing, "docker.io"},
		{"runsc without --oci-seccomp", map[string]runtimeInfo{"runc": {}, "runsc": {Path: "/usr/bin/runsc", Args: []string{"--network=host"}}}, "runtime-runsc", Warn, "--oci-seccomp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthy(t)
			info := goodInfo()
			info.Runtimes = tt.runtimes
			s.engine = fakeEngine{info: info}
			c := byName(s.run(context.Background()))[tt.check]
			if c.Status != tt.wantStatus || !strings.Contains(c.Fix, tt.wantFix) {
				t.Errorf("%s = %+v, want status %s and a fix mentioning %q", tt.check, c, tt.wantStatus, tt.wantFix)
			}
		})
	}
}

func TestEngineWithoutSeccompWarns(t *testing.T) {
	s := healthy(t)
	info := goodInfo()
	info.SecurityOptions = []string{"name=apparmor"}
	s.engine = fakeEngine{info: info}
	if c := byName(s.run(context.Background()))["docker-engine"]; c.Status != Warn || c.Fix == "" {
		t.Errorf("docker-engine = %+v, want warn with a fix", c)
	}
}

func TestRunnerImage(t *testing.T) {
	s := healthy(t)
	s.engine = fakeEngine{info: goodInfo(), imageErr: errImageNotFound}
	if c := byName(s.run(context.Background()))["runner-image"]; c.Status != Missing || c.Fix != "build it: make images" {
		t.Errorf("runner-image = %+v, want missing with fix make images", c)
	}
	s.engine = fakeEngine{info: goodInfo(), imageErr: errors.New("engine hiccup")}
	if c := byName(s.run(context.Background()))["runner-image"]; c.Status != Warn {
		t.Errorf("runner-image on an engine error = %+v, want warn", c)
	}
}

func TestNotRoot(t *testing.T) {
	s := healthy(t)
	s.euid = 1000
	s.chainExists = func(string, string) (bool, error) { t.Error("iptables was run without root"); return false, nil }
	m := byName(s.run(context.Background()))
	if c := m["root"]; c.Status != Missing || !strings.Contains(c.Detail, "uid 1000") || c.Fix == "" {
		t.Errorf("root = %+v, want missing naming uid 1000, with a fix", c)
	}
	if c := m["docker-user-chain"]; c.Status != Warn || !strings.HasPrefix(c.Detail, "could not tell") {
		t.Errorf("docker-user-chain = %+v, want warn / could not tell", c)
	}
}

func TestBubblewrapMissing(t *testing.T) {
	s := healthy(t)
	s.lookPath = func(string) (string, error) { return "", errors.New("not found") }
	if c := byName(s.run(context.Background()))["bubblewrap"]; c.Status != Missing || !strings.Contains(c.Fix, "bubblewrap") {
		t.Errorf("bubblewrap = %+v, want missing with an install fix", c)
	}
}

func TestTracepoints(t *testing.T) {
	s := healthy(t)
	s.root = fakeRoot(t, v1Mounts, false, nil)
	if c := checkTracepoints(s); c.Status != Missing || !strings.Contains(c.Fix, "mount -t tracefs") {
		t.Errorf("unmounted tracefs: %+v, want missing with a mount fix", c)
	}

	s.root = fakeRoot(t, v1Mounts, false, map[string]string{"sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id": "21"})
	if c := checkTracepoints(s); c.Status != OK || c.Detail != "raw_syscalls tracepoints in /sys/kernel/debug/tracing (no kernel BTF at /sys/kernel/btf/vmlinux)" {
		t.Errorf("debugfs tracing: %+v, want ok through debugfs, noting no BTF", c)
	}

	s.root = t.TempDir() // no /sys/kernel/tracing at all
	if c := checkTracepoints(s); c.Status != Missing || !strings.Contains(c.Fix, "CONFIG_FTRACE_SYSCALLS") {
		t.Errorf("no tracefs in the kernel: %+v, want missing with a kernel fix", c)
	}
}

func TestCgroup(t *testing.T) {
	tests := []struct {
		name       string
		mounts     string
		files      map[string]string
		wantStatus Status
		wantDetail string
	}{
		{
			name:       "v2",
			mounts:     "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n",
			files:      map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"},
			wantStatus: OK,
			wantDetail: "v2",
		},
		{
			name:       "v2 without pids",
			mounts:     "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
			files:      map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"},
			wantStatus: Warn,
			wantDetail: "v2; no pids controller: memory and process limits cannot be enforced",
		},
		{
			name:       "v1 only",
			mounts:     "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n",
			wantStatus: OK,
			wantDetail: "v1",
		},
		{
			name:       "none",
			mounts:     "proc /proc proc rw 0 0\n",
			wantStatus: Missing,
			wantDetail: "no cgroup filesystem is mounted on /sys/fs/cgroup",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthy(t)
			s.root = fakeRoot(t, tt.mounts, true, tt.files)
			c := checkCgroup(s)
			if c.Status != tt.wantStatus || c.Detail != tt.wantDetail {
				t.Errorf("got %s %q, want %s %q", c.Status, c.Detail, tt.wantStatus, tt.wantDetail)
			}
			if c.Status != OK && c.Fix == "" {
				t.Errorf("status %s without a fix", c.Status)
			}
		})
	}
}

func TestDockerUserChain(t *testing.T) {
	s := healthy(t)
	s.chainExists = func(string, string) (bool, error) { return false, nil }
	if c := checkDockerUserChain(s); c.Status != Missing || c.Fix == "" {
		t.Errorf("absent chain: %+v, want missing with a fix", c)
	}
	s.chainExists = func(string, string) (bool, error) { return false, errors.New("exec: iptables: not found") }
	if c := checkDockerUserChain(s); c.Status != Missing || !strings.Contains(c.Detail, "not found") {
		t.Errorf("no iptables: %+v, want missing naming the error", c)
	}
}

func TestShortID(t *testing.T) {
	for in, want := range map[string]string{
		"sha256:0123456789abcdef": "sha256:0123456789ab",
		"0123456789abcdef":        "0123456789ab",
		"sha256:abc":              "sha256:abc",
	} {
		if got := shortID(in); got != want {
			t.Errorf("shortID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunOnThisMachine runs the real checks. Whatever this machine lacks, Run
// must return every check, each one either ok or carrying a one-line fix.
func TestRunOnThisMachine(t *testing.T) {
	checks := Run(context.Background())
	if len(checks) != len(wantNames) {
		t.Fatalf("got %d checks, want %d", len(checks), len(wantNames))
	}
	for i, c := range checks {
		if c.Name != wantNames[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, wantNames[i])
		}
		switch c.Status {
		case OK:
		case Missing, Warn:
			if c.Fix == "" || strings.Contains(c.Fix, "\n") {
				t.Errorf("%s is %s without a one-line fix: %+v", c.Name, c.Status, c)
			}
		default:
			t.Errorf("%s has status %q", c.Name, c.Status)
		}
		if c.Detail == "" || strings.Contains(c.Detail, "\n") {
			t.Errorf("%s detail is not one line: %q", c.Name, c.Detail)
		}
		t.Logf("%-8s %-18s %s", c.Status, c.Name, c.Detail)
	}
}

// TestForTarget: a runc target does not need runsc or bubblewrap, a bwrap
// target does not need the runner image or any OCI runtime, and a gap in
// what a target does use stays missing.
func TestForTarget(t *testing.T) {
	all := []Check{
		{Name: "docker-engine", Status: OK}, {Name: "runtime-runc", Status: OK},
		{Name: "runtime-runsc", Status: Missing}, {Name: "bubblewrap", Status: Missing},
		{Name: "root", Status: OK}, {Name: "runner-image", Status: Missing},
	}
	status := func(cs []Check) map[string]Status {
		m := map[string]Status{}
		for _, c := range cs {
			m[c.Name] = c.Status
		}
		return m
	}
	runc := status(ForTarget(all, "t", Needs{Runner: "docker", Image: RunnerImage}))
	if runc["runtime-runsc"] != Warn || runc["bubblewrap"] != Warn || runc["runner-image"] != Missing {
		t.Errorf("runc target: %v", runc)
	}
	gv := status(ForTarget(all, "t", Needs{Runner: "docker", Runtime: "runsc", Image: "example.test/img:1"}))
	if gv["runtime-runsc"] != Missing || gv["runner-image"] != Warn {
		t.Errorf("gVisor target with its own image: %v", gv)
	}
	bw := status(ForTarget(all, "t", Needs{Runner: "bwrap"}))
	if bw["bubblewrap"] != Missing || bw["runtime-runsc"] != Warn || bw["runner-image"] != Warn {
		t.Errorf("bwrap target: %v", bw)
	}
	if c := ForTarget(all, "weak", Needs{Runner: "bwrap"})[2]; c.Detail != " (not needed by target weak)" {
		t.Errorf("a downgraded check does not name the target: %+v", c)
	}
}
