package main

import (
	"slices"
	"testing"
)

// A cgroup v1 host with a v2 hierarchy beside (this machine's layout, and
// Debian's hybrid one), a run in a CI job's cgroups: the reaper leaves
// every hierarchy where it is below the top, and none where it is at it.
func TestCgroupMoves(t *testing.T) {
	mountinfo := `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset,clone_children
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
41 22 0:38 /docker/abc /mnt/cg\040x rw,relatime - cgroup cgroup rw,freezer
`
	cgroups := `9:name=systemd:/system.slice/ci-job.service
8:pids:/system.slice/ci-job.service
6:freezer:/docker/abc
4:memory:/
3:cpuset:/
2:cpuacct,cpu:/system.slice/ci-job.service/run
0::/system.slice/ci-job.service
`
	got := cgroupMoves(cgroups, mountinfo)
	want := []cgroupMove{
		{"/sys/fs/cgroup/systemd", "/system.slice/ci-job.service"},
		{"/sys/fs/cgroup/pids", "/system.slice/ci-job.service"},
		{"/sys/fs/cgroup/cpu,cpuacct", "/system.slice/ci-job.service/run"},
		{"/sys/fs/cgroup/unified", "/system.slice/ci-job.service"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("cgroupMoves:\n got %v\nwant %v", got, want)
	}
	// A freezer subtree mounted from /docker/abc: the process is at the
	// top it can reach, nothing to leave; below it, the mount point (with
	// its escaped space) is where it goes.
	got = cgroupMoves("6:freezer:/docker/abc/run\n", mountinfo)
	if want := []cgroupMove{{"/mnt/cg x", "/docker/abc/run"}}; !slices.Equal(got, want) {
		t.Errorf("cgroupMoves in a subtree mount: got %v, want %v", got, want)
	}
	if got := cgroupMoves("12:blkio:/a\n", mountinfo); len(got) != 0 {
		t.Errorf("a hierarchy that is not mounted here: got %v, want nothing", got)
	}
}
