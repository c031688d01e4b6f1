package docker

import (
	"testing"

	"github.com/moby/moby/api/types/mount"

	"github.com/sandcheck/sandcheck/targets"
)

// A tmpfs is imported as Docker applies it: noexec, nosuid and nodev
// unless its options say exec, and a size only where one was given.
func TestTmpfsImportsAsApplied(t *testing.T) {
	quiet := func(string, ...any) {}
	cases := []struct {
		opts     string
		exec     bool
		size     string
		nrInodes int64
	}{
		{"", false, "", 0},
		{"rw", false, "", 0},
		{"rw,noexec,nosuid,size=65536k", false, "65536k", 0},
		{"exec,size=16m,nr_inodes=400", true, "16m", 400},
	}
	for _, c := range cases {
		got := tmpfsFrom("/work", c.opts, quiet)
		if got.Exec != c.exec || got.Size != c.size || got.NrInodes != c.nrInodes {
			t.Errorf("--tmpfs /work:%s imported as %+v, want exec %v size %q nr_inodes %d", c.opts, got, c.exec, c.size, c.nrInodes)
		}
	}
	// The mount API's tmpfs: the same defaults, its size in bytes.
	api := []mount.Mount{
		{Type: mount.TypeBind, Target: "/scratch", Source: "/x"},
		{Type: mount.TypeTmpfs, Target: "/scratch", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 1 << 20, Options: [][]string{{"exec"}}}},
		{Type: mount.TypeTmpfs, Target: "/other", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 9}},
	}
	if got := tmpfsMount("/scratch", api, quiet); !got.Exec || got.Size != "1048576" {
		t.Errorf("--mount type=tmpfs,destination=/scratch,tmpfs-size=1048576 (exec) imported as %+v", got)
	}
	if got := tmpfsMount("/bare", api, quiet); got.Exec || got.Size != "" {
		t.Errorf("a mount-API tmpfs with no options imported as %+v, want noexec and no size", got)
	}
}

// A tmpfs without a size runs as Docker runs one (no size option: the
// kernel's cap), never refused; a size that is given must be one.
func TestTmpfsWithoutSizeRuns(t *testing.T) {
	d := targets.Docker{Runtime: "runc", Network: "none", Tmpfs: []targets.Tmpfs{{Path: "/work"}, {Path: "/tmp", Size: "1Mi"}}}
	s, err := newSettings(d)
	if err != nil {
		t.Fatalf("a size-less tmpfs is refused: %v", err)
	}
	if got := s.tmpfs["/work"]; got != "rw,noexec,nosuid,nodev" {
		t.Errorf("size-less tmpfs options %q, want rw,noexec,nosuid,nodev", got)
	}
	if got := s.tmpfs["/tmp"]; got != "rw,noexec,nosuid,nodev,size=1048576" {
		t.Errorf("sized tmpfs options %q", got)
	}
	d.Tmpfs = []targets.Tmpfs{{Path: "/work", Size: "0"}}
	if _, err := newSettings(d); err == nil {
		t.Error("a tmpfs of size 0 was accepted")
	}
}

// The OOM kill count is read from cgroup v1's memory.oom_control and v2's
// memory.events; a file without the line, or with a bad count, is no count.
func TestOOMKillLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    uint64
		ok   bool
		fail bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true, false},
		{"low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n", 2, true, false},
		{"oom_kill_disable 0\nunder_oom 0\n", 0, false, false},
		{"oom_kill -1\n", 0, true, true},
	} {
		n, ok, err := oomKillLine([]byte(c.in))
		if n != c.n || ok != c.ok || (err != nil) != c.fail {
			t.Errorf("%q: %d %v %v, want %d %v error %v", c.in, n, ok, err, c.n, c.ok, c.fail)
		}
	}
}
